//! Linux x86_64 system-call numbers and names: the ABI musl's patched
//! entry hands to `__ebb_syscall` (the kernel's
//! `arch/x86/entry/syscalls/syscall_64.tbl`, as installed in
//! `asm/unistd_64.h`). Numbers 335 to 423 are unassigned on x86_64 (the
//! range kept for the x32 ABI's own numbers and for numbers shared by
//! every architecture, which start at 424).
//!
//! Generated once from Debian 12's `linux-libc-dev` header and checked
//! against the installed header by `tests/sysno_header.rs`.

/// The number of every x86_64 system call, by its kernel name.
pub mod nr {
    /// `read`.
    pub const READ: usize = 0;
    /// `write`.
    pub const WRITE: usize = 1;
    /// `open`.
    pub const OPEN: usize = 2;
    /// `close`.
    pub const CLOSE: usize = 3;
    /// `stat`.
    pub const STAT: usize = 4;
    /// `fstat`.
    pub const FSTAT: usize = 5;
    /// `lstat`.
    pub const LSTAT: usize = 6;
    /// `poll`.
    pub const POLL: usize = 7;
    /// `lseek`.
    pub const LSEEK: usize = 8;
    /// `mmap`.
    pub const MMAP: usize = 9;
    /// `mprotect`.
    pub const MPROTECT: usize = 10;
    /// `munmap`.
    pub const MUNMAP: usize = 11;
    /// `brk`.
    pub const BRK: usize = 12;
    /// `rt_sigaction`.
    pub const RT_SIGACTION: usize = 13;
    /// `rt_sigprocmask`.
    pub const RT_SIGPROCMASK: usize = 14;
    /// `rt_sigreturn`.
    pub const RT_SIGRETURN: usize = 15;
    /// `ioctl`.
    pub const IOCTL: usize = 16;
    /// `pread64`.
    pub const PREAD64: usize = 17;
    /// `pwrite64`.
    pub const PWRITE64: usize = 18;
    /// `readv`.
    pub const READV: usize = 19;
    /// `writev`.
    pub const WRITEV: usize = 20;
    /// `access`.
    pub const ACCESS: usize = 21;
    /// `pipe`.
    pub const PIPE: usize = 22;
    /// `select`.
    pub const SELECT: usize = 23;
    /// `sched_yield`.
    pub const SCHED_YIELD: usize = 24;
    /// `mremap`.
    pub const MREMAP: usize = 25;
    /// `msync`.
    pub const MSYNC: usize = 26;
    /// `mincore`.
    pub const MINCORE: usize = 27;
    /// `madvise`.
    pub const MADVISE: usize = 28;
    /// `shmget`.
    pub const SHMGET: usize = 29;
    /// `shmat`.
    pub const SHMAT: usize = 30;
    /// `shmctl`.
    pub const SHMCTL: usize = 31;
    /// `dup`.
    pub const DUP: usize = 32;
    /// `dup2`.
    pub const DUP2: usize = 33;
    /// `pause`.
    pub const PAUSE: usize = 34;
    /// `nanosleep`.
    pub const NANOSLEEP: usize = 35;
    /// `getitimer`.
    pub const GETITIMER: usize = 36;
    /// `alarm`.
    pub const ALARM: usize = 37;
    /// `setitimer`.
    pub const SETITIMER: usize = 38;
    /// `getpid`.
    pub const GETPID: usize = 39;
    /// `sendfile`.
    pub const SENDFILE: usize = 40;
    /// `socket`.
    pub const SOCKET: usize = 41;
    /// `connect`.
    pub const CONNECT: usize = 42;
    /// `accept`.
    pub const ACCEPT: usize = 43;
    /// `sendto`.
    pub const SENDTO: usize = 44;
    /// `recvfrom`.
    pub const RECVFROM: usize = 45;
    /// `sendmsg`.
    pub const SENDMSG: usize = 46;
    /// `recvmsg`.
    pub const RECVMSG: usize = 47;
    /// `shutdown`.
    pub const SHUTDOWN: usize = 48;
    /// `bind`.
    pub const BIND: usize = 49;
    /// `listen`.
    pub const LISTEN: usize = 50;
    /// `getsockname`.
    pub const GETSOCKNAME: usize = 51;
    /// `getpeername`.
    pub const GETPEERNAME: usize = 52;
    /// `socketpair`.
    pub const SOCKETPAIR: usize = 53;
    /// `setsockopt`.
    pub const SETSOCKOPT: usize = 54;
    /// `getsockopt`.
    pub const GETSOCKOPT: usize = 55;
    /// `clone`.
    pub const CLONE: usize = 56;
    /// `fork`.
    pub const FORK: usize = 57;
    /// `vfork`.
    pub const VFORK: usize = 58;
    /// `execve`.
    pub const EXECVE: usize = 59;
    /// `exit`.
    pub const EXIT: usize = 60;
    /// `wait4`.
    pub const WAIT4: usize = 61;
    /// `kill`.
    pub const KILL: usize = 62;
    /// `uname`.
    pub const UNAME: usize = 63;
    /// `semget`.
    pub const SEMGET: usize = 64;
    /// `semop`.
    pub const SEMOP: usize = 65;
    /// `semctl`.
    pub const SEMCTL: usize = 66;
    /// `shmdt`.
    pub const SHMDT: usize = 67;
    /// `msgget`.
    pub const MSGGET: usize = 68;
    /// `msgsnd`.
    pub const MSGSND: usize = 69;
    /// `msgrcv`.
    pub const MSGRCV: usize = 70;
    /// `msgctl`.
    pub const MSGCTL: usize = 71;
    /// `fcntl`.
    pub const FCNTL: usize = 72;
    /// `flock`.
    pub const FLOCK: usize = 73;
    /// `fsync`.
    pub const FSYNC: usize = 74;
    /// `fdatasync`.
    pub const FDATASYNC: usize = 75;
    /// `truncate`.
    pub const TRUNCATE: usize = 76;
    /// `ftruncate`.
    pub const FTRUNCATE: usize = 77;
    /// `getdents`.
    pub const GETDENTS: usize = 78;
    /// `getcwd`.
    pub const GETCWD: usize = 79;
    /// `chdir`.
    pub const CHDIR: usize = 80;
    /// `fchdir`.
    pub const FCHDIR: usize = 81;
    /// `rename`.
    pub const RENAME: usize = 82;
    /// `mkdir`.
    pub const MKDIR: usize = 83;
    /// `rmdir`.
    pub const RMDIR: usize = 84;
    /// `creat`.
    pub const CREAT: usize = 85;
    /// `link`.
    pub const LINK: usize = 86;
    /// `unlink`.
    pub const UNLINK: usize = 87;
    /// `symlink`.
    pub const SYMLINK: usize = 88;
    /// `readlink`.
    pub const READLINK: usize = 89;
    /// `chmod`.
    pub const CHMOD: usize = 90;
    /// `fchmod`.
    pub const FCHMOD: usize = 91;
    /// `chown`.
    pub const CHOWN: usize = 92;
    /// `fchown`.
    pub const FCHOWN: usize = 93;
    /// `lchown`.
    pub const LCHOWN: usize = 94;
    /// `umask`.
    pub const UMASK: usize = 95;
    /// `gettimeofday`.
    pub const GETTIMEOFDAY: usize = 96;
    /// `getrlimit`.
    pub const GETRLIMIT: usize = 97;
    /// `getrusage`.
    pub const GETRUSAGE: usize = 98;
    /// `sysinfo`.
    pub const SYSINFO: usize = 99;
    /// `times`.
    pub const TIMES: usize = 100;
    /// `ptrace`.
    pub const PTRACE: usize = 101;
    /// `getuid`.
    pub const GETUID: usize = 102;
    /// `syslog`.
    pub const SYSLOG: usize = 103;
    /// `getgid`.
    pub const GETGID: usize = 104;
    /// `setuid`.
    pub const SETUID: usize = 105;
    /// `setgid`.
    pub const SETGID: usize = 106;
    /// `geteuid`.
    pub const GETEUID: usize = 107;
    /// `getegid`.
    pub const GETEGID: usize = 108;
    /// `setpgid`.
    pub const SETPGID: usize = 109;
    /// `getppid`.
    pub const GETPPID: usize = 110;
    /// `getpgrp`.
    pub const GETPGRP: usize = 111;
    /// `setsid`.
    pub const SETSID: usize = 112;
    /// `setreuid`.
    pub const SETREUID: usize = 113;
    /// `setregid`.
    pub const SETREGID: usize = 114;
    /// `getgroups`.
    pub const GETGROUPS: usize = 115;
    /// `setgroups`.
    pub const SETGROUPS: usize = 116;
    /// `setresuid`.
    pub const SETRESUID: usize = 117;
    /// `getresuid`.
    pub const GETRESUID: usize = 118;
    /// `setresgid`.
    pub const SETRESGID: usize = 119;
    /// `getresgid`.
    pub const GETRESGID: usize = 120;
    /// `getpgid`.
    pub const GETPGID: usize = 121;
    /// `setfsuid`.
    pub const SETFSUID: usize = 122;
    /// `setfsgid`.
    pub const SETFSGID: usize = 123;
    /// `getsid`.
    pub const GETSID: usize = 124;
    /// `capget`.
    pub const CAPGET: usize = 125;
    /// `capset`.
    pub const CAPSET: usize = 126;
    /// `rt_sigpending`.
    pub const RT_SIGPENDING: usize = 127;
    /// `rt_sigtimedwait`.
    pub const RT_SIGTIMEDWAIT: usize = 128;
    /// `rt_sigqueueinfo`.
    pub const RT_SIGQUEUEINFO: usize = 129;
    /// `rt_sigsuspend`.
    pub const RT_SIGSUSPEND: usize = 130;
    /// `sigaltstack`.
    pub const SIGALTSTACK: usize = 131;
    /// `utime`.
    pub const UTIME: usize = 132;
    /// `mknod`.
    pub const MKNOD: usize = 133;
    /// `uselib`.
    pub const USELIB: usize = 134;
    /// `personality`.
    pub const PERSONALITY: usize = 135;
    /// `ustat`.
    pub const USTAT: usize = 136;
    /// `statfs`.
    pub const STATFS: usize = 137;
    /// `fstatfs`.
    pub const FSTATFS: usize = 138;
    /// `sysfs`.
    pub const SYSFS: usize = 139;
    /// `getpriority`.
    pub const GETPRIORITY: usize = 140;
    /// `setpriority`.
    pub const SETPRIORITY: usize = 141;
    /// `sched_setparam`.
    pub const SCHED_SETPARAM: usize = 142;
    /// `sched_getparam`.
    pub const SCHED_GETPARAM: usize = 143;
    /// `sched_setscheduler`.
    pub const SCHED_SETSCHEDULER: usize = 144;
    /// `sched_getscheduler`.
    pub const SCHED_GETSCHEDULER: usize = 145;
    /// `sched_get_priority_max`.
    pub const SCHED_GET_PRIORITY_MAX: usize = 146;
    /// `sched_get_priority_min`.
    pub const SCHED_GET_PRIORITY_MIN: usize = 147;
    /// `sched_rr_get_interval`.
    pub const SCHED_RR_GET_INTERVAL: usize = 148;
    /// `mlock`.
    pub const MLOCK: usize = 149;
    /// `munlock`.
    pub const MUNLOCK: usize = 150;
    /// `mlockall`.
    pub const MLOCKALL: usize = 151;
    /// `munlockall`.
    pub const MUNLOCKALL: usize = 152;
    /// `vhangup`.
    pub const VHANGUP: usize = 153;
    /// `modify_ldt`.
    pub const MODIFY_LDT: usize = 154;
    /// `pivot_root`.
    pub const PIVOT_ROOT: usize = 155;
    /// `_sysctl`.
    pub const _SYSCTL: usize = 156;
    /// `prctl`.
    pub const PRCTL: usize = 157;
    /// `arch_prctl`.
    pub const ARCH_PRCTL: usize = 158;
    /// `adjtimex`.
    pub const ADJTIMEX: usize = 159;
    /// `setrlimit`.
    pub const SETRLIMIT: usize = 160;
    /// `chroot`.
    pub const CHROOT: usize = 161;
    /// `sync`.
    pub const SYNC: usize = 162;
    /// `acct`.
    pub const ACCT: usize = 163;
    /// `settimeofday`.
    pub const SETTIMEOFDAY: usize = 164;
    /// `mount`.
    pub const MOUNT: usize = 165;
    /// `umount2`.
    pub const UMOUNT2: usize = 166;
    /// `swapon`.
    pub const SWAPON: usize = 167;
    /// `swapoff`.
    pub const SWAPOFF: usize = 168;
    /// `reboot`.
    pub const REBOOT: usize = 169;
    /// `sethostname`.
    pub const SETHOSTNAME: usize = 170;
    /// `setdomainname`.
    pub const SETDOMAINNAME: usize = 171;
    /// `iopl`.
    pub const IOPL: usize = 172;
    /// `ioperm`.
    pub const IOPERM: usize = 173;
    /// `create_module`.
    pub const CREATE_MODULE: usize = 174;
    /// `init_module`.
    pub const INIT_MODULE: usize = 175;
    /// `delete_module`.
    pub const DELETE_MODULE: usize = 176;
    /// `get_kernel_syms`.
    pub const GET_KERNEL_SYMS: usize = 177;
    /// `query_module`.
    pub const QUERY_MODULE: usize = 178;
    /// `quotactl`.
    pub const QUOTACTL: usize = 179;
    /// `nfsservctl`.
    pub const NFSSERVCTL: usize = 180;
    /// `getpmsg`.
    pub const GETPMSG: usize = 181;
    /// `putpmsg`.
    pub const PUTPMSG: usize = 182;
    /// `afs_syscall`.
    pub const AFS_SYSCALL: usize = 183;
    /// `tuxcall`.
    pub const TUXCALL: usize = 184;
    /// `security`.
    pub const SECURITY: usize = 185;
    /// `gettid`.
    pub const GETTID: usize = 186;
    /// `readahead`.
    pub const READAHEAD: usize = 187;
    /// `setxattr`.
    pub const SETXATTR: usize = 188;
    /// `lsetxattr`.
    pub const LSETXATTR: usize = 189;
    /// `fsetxattr`.
    pub const FSETXATTR: usize = 190;
    /// `getxattr`.
    pub const GETXATTR: usize = 191;
    /// `lgetxattr`.
    pub const LGETXATTR: usize = 192;
    /// `fgetxattr`.
    pub const FGETXATTR: usize = 193;
    /// `listxattr`.
    pub const LISTXATTR: usize = 194;
    /// `llistxattr`.
    pub const LLISTXATTR: usize = 195;
    /// `flistxattr`.
    pub const FLISTXATTR: usize = 196;
    /// `removexattr`.
    pub const REMOVEXATTR: usize = 197;
    /// `lremovexattr`.
    pub const LREMOVEXATTR: usize = 198;
    /// `fremovexattr`.
    pub const FREMOVEXATTR: usize = 199;
    /// `tkill`.
    pub const TKILL: usize = 200;
    /// `time`.
    pub const TIME: usize = 201;
    /// `futex`.
    pub const FUTEX: usize = 202;
    /// `sched_setaffinity`.
    pub const SCHED_SETAFFINITY: usize = 203;
    /// `sched_getaffinity`.
    pub const SCHED_GETAFFINITY: usize = 204;
    /// `set_thread_area`.
    pub const SET_THREAD_AREA: usize = 205;
    /// `io_setup`.
    pub const IO_SETUP: usize = 206;
    /// `io_destroy`.
    pub const IO_DESTROY: usize = 207;
    /// `io_getevents`.
    pub const IO_GETEVENTS: usize = 208;
    /// `io_submit`.
    pub const IO_SUBMIT: usize = 209;
    /// `io_cancel`.
    pub const IO_CANCEL: usize = 210;
    /// `get_thread_area`.
    pub const GET_THREAD_AREA: usize = 211;
    /// `lookup_dcookie`.
    pub const LOOKUP_DCOOKIE: usize = 212;
    /// `epoll_create`.
    pub const EPOLL_CREATE: usize = 213;
    /// `epoll_ctl_old`.
    pub const EPOLL_CTL_OLD: usize = 214;
    /// `epoll_wait_old`.
    pub const EPOLL_WAIT_OLD: usize = 215;
    /// `remap_file_pages`.
    pub const REMAP_FILE_PAGES: usize = 216;
    /// `getdents64`.
    pub const GETDENTS64: usize = 217;
    /// `set_tid_address`.
    pub const SET_TID_ADDRESS: usize = 218;
    /// `restart_syscall`.
    pub const RESTART_SYSCALL: usize = 219;
    /// `semtimedop`.
    pub const SEMTIMEDOP: usize = 220;
    /// `fadvise64`.
    pub const FADVISE64: usize = 221;
    /// `timer_create`.
    pub const TIMER_CREATE: usize = 222;
    /// `timer_settime`.
    pub const TIMER_SETTIME: usize = 223;
    /// `timer_gettime`.
    pub const TIMER_GETTIME: usize = 224;
    /// `timer_getoverrun`.
    pub const TIMER_GETOVERRUN: usize = 225;
    /// `timer_delete`.
    pub const TIMER_DELETE: usize = 226;
    /// `clock_settime`.
    pub const CLOCK_SETTIME: usize = 227;
    /// `clock_gettime`.
    pub const CLOCK_GETTIME: usize = 228;
    /// `clock_getres`.
    pub const CLOCK_GETRES: usize = 229;
    /// `clock_nanosleep`.
    pub const CLOCK_NANOSLEEP: usize = 230;
    /// `exit_group`.
    pub const EXIT_GROUP: usize = 231;
    /// `epoll_wait`.
    pub const EPOLL_WAIT: usize = 232;
    /// `epoll_ctl`.
    pub const EPOLL_CTL: usize = 233;
    /// `tgkill`.
    pub const TGKILL: usize = 234;
    /// `utimes`.
    pub const UTIMES: usize = 235;
    /// `vserver`.
    pub const VSERVER: usize = 236;
    /// `mbind`.
    pub const MBIND: usize = 237;
    /// `set_mempolicy`.
    pub const SET_MEMPOLICY: usize = 238;
    /// `get_mempolicy`.
    pub const GET_MEMPOLICY: usize = 239;
    /// `mq_open`.
    pub const MQ_OPEN: usize = 240;
    /// `mq_unlink`.
    pub const MQ_UNLINK: usize = 241;
    /// `mq_timedsend`.
    pub const MQ_TIMEDSEND: usize = 242;
    /// `mq_timedreceive`.
    pub const MQ_TIMEDRECEIVE: usize = 243;
    /// `mq_notify`.
    pub const MQ_NOTIFY: usize = 244;
    /// `mq_getsetattr`.
    pub const MQ_GETSETATTR: usize = 245;
    /// `kexec_load`.
    pub const KEXEC_LOAD: usize = 246;
    /// `waitid`.
    pub const WAITID: usize = 247;
    /// `add_key`.
    pub const ADD_KEY: usize = 248;
    /// `request_key`.
    pub const REQUEST_KEY: usize = 249;
    /// `keyctl`.
    pub const KEYCTL: usize = 250;
    /// `ioprio_set`.
    pub const IOPRIO_SET: usize = 251;
    /// `ioprio_get`.
    pub const IOPRIO_GET: usize = 252;
    /// `inotify_init`.
    pub const INOTIFY_INIT: usize = 253;
    /// `inotify_add_watch`.
    pub const INOTIFY_ADD_WATCH: usize = 254;
    /// `inotify_rm_watch`.
    pub const INOTIFY_RM_WATCH: usize = 255;
    /// `migrate_pages`.
    pub const MIGRATE_PAGES: usize = 256;
    /// `openat`.
    pub const OPENAT: usize = 257;
    /// `mkdirat`.
    pub const MKDIRAT: usize = 258;
    /// `mknodat`.
    pub const MKNODAT: usize = 259;
    /// `fchownat`.
    pub const FCHOWNAT: usize = 260;
    /// `futimesat`.
    pub const FUTIMESAT: usize = 261;
    /// `newfstatat`.
    pub const NEWFSTATAT: usize = 262;
    /// `unlinkat`.
    pub const UNLINKAT: usize = 263;
    /// `renameat`.
    pub const RENAMEAT: usize = 264;
    /// `linkat`.
    pub const LINKAT: usize = 265;
    /// `symlinkat`.
    pub const SYMLINKAT: usize = 266;
    /// `readlinkat`.
    pub const READLINKAT: usize = 267;
    /// `fchmodat`.
    pub const FCHMODAT: usize = 268;
    /// `faccessat`.
    pub const FACCESSAT: usize = 269;
    /// `pselect6`.
    pub const PSELECT6: usize = 270;
    /// `ppoll`.
    pub const PPOLL: usize = 271;
    /// `unshare`.
    pub const UNSHARE: usize = 272;
    /// `set_robust_list`.
    pub const SET_ROBUST_LIST: usize = 273;
    /// `get_robust_list`.
    pub const GET_ROBUST_LIST: usize = 274;
    /// `splice`.
    pub const SPLICE: usize = 275;
    /// `tee`.
    pub const TEE: usize = 276;
    /// `sync_file_range`.
    pub const SYNC_FILE_RANGE: usize = 277;
    /// `vmsplice`.
    pub const VMSPLICE: usize = 278;
    /// `move_pages`.
    pub const MOVE_PAGES: usize = 279;
    /// `utimensat`.
    pub const UTIMENSAT: usize = 280;
    /// `epoll_pwait`.
    pub const EPOLL_PWAIT: usize = 281;
    /// `signalfd`.
    pub const SIGNALFD: usize = 282;
    /// `timerfd_create`.
    pub const TIMERFD_CREATE: usize = 283;
    /// `eventfd`.
    pub const EVENTFD: usize = 284;
    /// `fallocate`.
    pub const FALLOCATE: usize = 285;
    /// `timerfd_settime`.
    pub const TIMERFD_SETTIME: usize = 286;
    /// `timerfd_gettime`.
    pub const TIMERFD_GETTIME: usize = 287;
    /// `accept4`.
    pub const ACCEPT4: usize = 288;
    /// `signalfd4`.
    pub const SIGNALFD4: usize = 289;
    /// `eventfd2`.
    pub const EVENTFD2: usize = 290;
    /// `epoll_create1`.
    pub const EPOLL_CREATE1: usize = 291;
    /// `dup3`.
    pub const DUP3: usize = 292;
    /// `pipe2`.
    pub const PIPE2: usize = 293;
    /// `inotify_init1`.
    pub const INOTIFY_INIT1: usize = 294;
    /// `preadv`.
    pub const PREADV: usize = 295;
    /// `pwritev`.
    pub const PWRITEV: usize = 296;
    /// `rt_tgsigqueueinfo`.
    pub const RT_TGSIGQUEUEINFO: usize = 297;
    /// `perf_event_open`.
    pub const PERF_EVENT_OPEN: usize = 298;
    /// `recvmmsg`.
    pub const RECVMMSG: usize = 299;
    /// `fanotify_init`.
    pub const FANOTIFY_INIT: usize = 300;
    /// `fanotify_mark`.
    pub const FANOTIFY_MARK: usize = 301;
    /// `prlimit64`.
    pub const PRLIMIT64: usize = 302;
    /// `name_to_handle_at`.
    pub const NAME_TO_HANDLE_AT: usize = 303;
    /// `open_by_handle_at`.
    pub const OPEN_BY_HANDLE_AT: usize = 304;
    /// `clock_adjtime`.
    pub const CLOCK_ADJTIME: usize = 305;
    /// `syncfs`.
    pub const SYNCFS: usize = 306;
    /// `sendmmsg`.
    pub const SENDMMSG: usize = 307;
    /// `setns`.
    pub const SETNS: usize = 308;
    /// `getcpu`.
    pub const GETCPU: usize = 309;
    /// `process_vm_readv`.
    pub const PROCESS_VM_READV: usize = 310;
    /// `process_vm_writev`.
    pub const PROCESS_VM_WRITEV: usize = 311;
    /// `kcmp`.
    pub const KCMP: usize = 312;
    /// `finit_module`.
    pub const FINIT_MODULE: usize = 313;
    /// `sched_setattr`.
    pub const SCHED_SETATTR: usize = 314;
    /// `sched_getattr`.
    pub const SCHED_GETATTR: usize = 315;
    /// `renameat2`.
    pub const RENAMEAT2: usize = 316;
    /// `seccomp`.
    pub const SECCOMP: usize = 317;
    /// `getrandom`.
    pub const GETRANDOM: usize = 318;
    /// `memfd_create`.
    pub const MEMFD_CREATE: usize = 319;
    /// `kexec_file_load`.
    pub const KEXEC_FILE_LOAD: usize = 320;
    /// `bpf`.
    pub const BPF: usize = 321;
    /// `execveat`.
    pub const EXECVEAT: usize = 322;
    /// `userfaultfd`.
    pub const USERFAULTFD: usize = 323;
    /// `membarrier`.
    pub const MEMBARRIER: usize = 324;
    /// `mlock2`.
    pub const MLOCK2: usize = 325;
    /// `copy_file_range`.
    pub const COPY_FILE_RANGE: usize = 326;
    /// `preadv2`.
    pub const PREADV2: usize = 327;
    /// `pwritev2`.
    pub const PWRITEV2: usize = 328;
    /// `pkey_mprotect`.
    pub const PKEY_MPROTECT: usize = 329;
    /// `pkey_alloc`.
    pub const PKEY_ALLOC: usize = 330;
    /// `pkey_free`.
    pub const PKEY_FREE: usize = 331;
    /// `statx`.
    pub const STATX: usize = 332;
    /// `io_pgetevents`.
    pub const IO_PGETEVENTS: usize = 333;
    /// `rseq`.
    pub const RSEQ: usize = 334;
    /// `pidfd_send_signal`.
    pub const PIDFD_SEND_SIGNAL: usize = 424;
    /// `io_uring_setup`.
    pub const IO_URING_SETUP: usize = 425;
    /// `io_uring_enter`.
    pub const IO_URING_ENTER: usize = 426;
    /// `io_uring_register`.
    pub const IO_URING_REGISTER: usize = 427;
    /// `open_tree`.
    pub const OPEN_TREE: usize = 428;
    /// `move_mount`.
    pub const MOVE_MOUNT: usize = 429;
    /// `fsopen`.
    pub const FSOPEN: usize = 430;
    /// `fsconfig`.
    pub const FSCONFIG: usize = 431;
    /// `fsmount`.
    pub const FSMOUNT: usize = 432;
    /// `fspick`.
    pub const FSPICK: usize = 433;
    /// `pidfd_open`.
    pub const PIDFD_OPEN: usize = 434;
    /// `clone3`.
    pub const CLONE3: usize = 435;
    /// `close_range`.
    pub const CLOSE_RANGE: usize = 436;
    /// `openat2`.
    pub const OPENAT2: usize = 437;
    /// `pidfd_getfd`.
    pub const PIDFD_GETFD: usize = 438;
    /// `faccessat2`.
    pub const FACCESSAT2: usize = 439;
    /// `process_madvise`.
    pub const PROCESS_MADVISE: usize = 440;
    /// `epoll_pwait2`.
    pub const EPOLL_PWAIT2: usize = 441;
    /// `mount_setattr`.
    pub const MOUNT_SETATTR: usize = 442;
    /// `quotactl_fd`.
    pub const QUOTACTL_FD: usize = 443;
    /// `landlock_create_ruleset`.
    pub const LANDLOCK_CREATE_RULESET: usize = 444;
    /// `landlock_add_rule`.
    pub const LANDLOCK_ADD_RULE: usize = 445;
    /// `landlock_restrict_self`.
    pub const LANDLOCK_RESTRICT_SELF: usize = 446;
    /// `memfd_secret`.
    pub const MEMFD_SECRET: usize = 447;
    /// `process_mrelease`.
    pub const PROCESS_MRELEASE: usize = 448;
    /// `futex_waitv`.
    pub const FUTEX_WAITV: usize = 449;
    /// `set_mempolicy_home_node`.
    pub const SET_MEMPOLICY_HOME_NODE: usize = 450;
}

/// Names of calls 0 to 334, by number.
const NAMES_LOW: [&str; 335] = [
    "read",
    "write",
    "open",
    "close",
    "stat",
    "fstat",
    "lstat",
    "poll",
    "lseek",
    "mmap",
    "mprotect",
    "munmap",
    "brk",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "ioctl",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "access",
    "pipe",
    "select",
    "sched_yield",
    "mremap",
    "msync",
    "mincore",
    "madvise",
    "shmget",
    "shmat",
    "shmctl",
    "dup",
    "dup2",
    "pause",
    "nanosleep",
    "getitimer",
    "alarm",
    "setitimer",
    "getpid",
    "sendfile",
    "socket",
    "connect",
    "accept",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "shutdown",
    "bind",
    "listen",
    "getsockname",
    "getpeername",
    "socketpair",
    "setsockopt",
    "getsockopt",
    "clone",
    "fork",
    "vfork",
    "execve",
    "exit",
    "wait4",
    "kill",
    "uname",
    "semget",
    "semop",
    "semctl",
    "shmdt",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "fcntl",
    "flock",
    "fsync",
    "fdatasync",
    "truncate",
    "ftruncate",
    "getdents",
    "getcwd",
    "chdir",
    "fchdir",
    "rename",
    "mkdir",
    "rmdir",
    "creat",
    "link",
    "unlink",
    "symlink",
    "readlink",
    "chmod",
    "fchmod",
    "chown",
    "fchown",
    "lchown",
    "umask",
    "gettimeofday",
    "getrlimit",
    "getrusage",
    "sysinfo",
    "times",
    "ptrace",
    "getuid",
    "syslog",
    "getgid",
    "setuid",
    "setgid",
    "geteuid",
    "getegid",
    "setpgid",
    "getppid",
    "getpgrp",
    "setsid",
    "setreuid",
    "setregid",
    "getgroups",
    "setgroups",
    "setresuid",
    "getresuid",
    "setresgid",
    "getresgid",
    "getpgid",
    "setfsuid",
    "setfsgid",
    "getsid",
    "capget",
    "capset",
    "rt_sigpending",
    "rt_sigtimedwait",
    "rt_sigqueueinfo",
    "rt_sigsuspend",
    "sigaltstack",
    "utime",
    "mknod",
    "uselib",
    "personality",
    "ustat",
    "statfs",
    "fstatfs",
    "sysfs",
    "getpriority",
    "setpriority",
    "sched_setparam",
    "sched_getparam",
    "sched_setscheduler",
    "sched_getscheduler",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_rr_get_interval",
    "mlock",
    "munlock",
    "mlockall",
    "munlockall",
    "vhangup",
    "modify_ldt",
    "pivot_root",
    "_sysctl",
    "prctl",
    "arch_prctl",
    "adjtimex",
    "setrlimit",
    "chroot",
    "sync",
    "acct",
    "settimeofday",
    "mount",
    "umount2",
    "swapon",
    "swapoff",
    "reboot",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "create_module",
    "init_module",
    "delete_module",
    "get_kernel_syms",
    "query_module",
    "quotactl",
    "nfsservctl",
    "getpmsg",
    "putpmsg",
    "afs_syscall",
    "tuxcall",
    "security",
    "gettid",
    "readahead",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "tkill",
    "time",
    "futex",
    "sched_setaffinity",
    "sched_getaffinity",
    "set_thread_area",
    "io_setup",
    "io_destroy",
    "io_getevents",
    "io_submit",
    "io_cancel",
    "get_thread_area",
    "lookup_dcookie",
    "epoll_create",
    "epoll_ctl_old",
    "epoll_wait_old",
    "remap_file_pages",
    "getdents64",
    "set_tid_address",
    "restart_syscall",
    "semtimedop",
    "fadvise64",
    "timer_create",
    "timer_settime",
    "timer_gettime",
    "timer_getoverrun",
    "timer_delete",
    "clock_settime",
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "exit_group",
    "epoll_wait",
    "epoll_ctl",
    "tgkill",
    "utimes",
    "vserver",
    "mbind",
    "set_mempolicy",
    "get_mempolicy",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "kexec_load",
    "waitid",
    "add_key",
    "request_key",
    "keyctl",
    "ioprio_set",
    "ioprio_get",
    "inotify_init",
    "inotify_add_watch",
    "inotify_rm_watch",
    "migrate_pages",
    "openat",
    "mkdirat",
    "mknodat",
    "fchownat",
    "futimesat",
    "newfstatat",
    "unlinkat",
    "renameat",
    "linkat",
    "symlinkat",
    "readlinkat",
    "fchmodat",
    "faccessat",
    "pselect6",
    "ppoll",
    "unshare",
    "set_robust_list",
    "get_robust_list",
    "splice",
    "tee",
    "sync_file_range",
    "vmsplice",
    "move_pages",
    "utimensat",
    "epoll_pwait",
    "signalfd",
    "timerfd_create",
    "eventfd",
    "fallocate",
    "timerfd_settime",
    "timerfd_gettime",
    "accept4",
    "signalfd4",
    "eventfd2",
    "epoll_create1",
    "dup3",
    "pipe2",
    "inotify_init1",
    "preadv",
    "pwritev",
    "rt_tgsigqueueinfo",
    "perf_event_open",
    "recvmmsg",
    "fanotify_init",
    "fanotify_mark",
    "prlimit64",
    "name_to_handle_at",
    "open_by_handle_at",
    "clock_adjtime",
    "syncfs",
    "sendmmsg",
    "setns",
    "getcpu",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "finit_module",
    "sched_setattr",
    "sched_getattr",
    "renameat2",
    "seccomp",
    "getrandom",
    "memfd_create",
    "kexec_file_load",
    "bpf",
    "execveat",
    "userfaultfd",
    "membarrier",
    "mlock2",
    "copy_file_range",
    "preadv2",
    "pwritev2",
    "pkey_mprotect",
    "pkey_alloc",
    "pkey_free",
    "statx",
    "io_pgetevents",
    "rseq",
];

/// The first number of the shared range.
const HIGH_FIRST: usize = 424;

/// Names of calls 424 to 450, by number minus [`HIGH_FIRST`].
const NAMES_HIGH: [&str; 27] = [
    "pidfd_send_signal",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "pidfd_open",
    "clone3",
    "close_range",
    "openat2",
    "pidfd_getfd",
    "faccessat2",
    "process_madvise",
    "epoll_pwait2",
    "mount_setattr",
    "quotactl_fd",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    "memfd_secret",
    "process_mrelease",
    "futex_waitv",
    "set_mempolicy_home_node",
];

/// The kernel's name for call `nr`, if x86_64 Linux has one.
#[must_use]
pub fn name(nr: usize) -> Option<&'static str> {
    match nr {
        0..=334 => Some(NAMES_LOW[nr]),
        HIGH_FIRST.. => NAMES_HIGH.get(nr - HIGH_FIRST).copied(),
        _ => None,
    }
}

/// Every (number, name) pair, in number order.
pub fn all() -> impl Iterator<Item = (usize, &'static str)> {
    NAMES_LOW
        .iter()
        .enumerate()
        .chain(
            NAMES_HIGH
                .iter()
                .enumerate()
                .map(|(i, name)| (i + HIGH_FIRST, name)),
        )
        .map(|(nr, name)| (nr, *name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_agree() {
        assert_eq!(name(nr::READ), Some("read"));
        assert_eq!(name(nr::EXIT_GROUP), Some("exit_group"));
        assert_eq!(name(nr::PIDFD_SEND_SIGNAL), Some("pidfd_send_signal"));
        assert_eq!(
            name(nr::SET_MEMPOLICY_HOME_NODE),
            Some("set_mempolicy_home_node")
        );
        assert_eq!(name(335), None);
        assert_eq!(name(423), None);
        assert_eq!(name(451), None);
        assert_eq!(name(usize::MAX), None);
        assert_eq!(all().count(), 362);
    }
}
