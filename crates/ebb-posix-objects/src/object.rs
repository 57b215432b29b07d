//! The objects a program holds, by id: what its descriptors name
//! (`Target::Object` in the file table).

use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use core::cell::RefCell;

use ebb_core::{CoreId, EbbError, EbbRef, Multicore, MulticoreEbb, MulticoreRoot};

use ebb_posix::errno::{EINVAL, EMFILE};
use ebb_posix_files::table::ObjectKind;

use crate::epoll::Epoll;
use crate::eventfd::EventFd;
use crate::notify::Pollable;
use crate::pipe::PipeEnd;
use crate::socket::Socket;

/// One object.
#[derive(Clone)]
pub enum Object {
    /// A TCP socket.
    Socket(Rc<Socket>),
    /// An epoll set.
    Epoll(Rc<Epoll>),
    /// An eventfd.
    EventFd(Rc<EventFd>),
    /// A pipe's end.
    Pipe(Rc<PipeEnd>),
}

impl Object {
    /// Its kind, for fstat(2).
    #[must_use]
    pub fn kind(&self) -> ObjectKind {
        match self {
            Object::Socket(_) => ObjectKind::Socket,
            Object::Pipe(_) => ObjectKind::Pipe,
            Object::Epoll(_) | Object::EventFd(_) => ObjectKind::Anonymous,
        }
    }

    /// Its readiness and notifier.
    #[must_use]
    pub fn pollable(&self) -> &dyn Pollable {
        match self {
            Object::Socket(socket) => &**socket,
            Object::Epoll(epoll) => &**epoll,
            Object::EventFd(counter) => &**counter,
            Object::Pipe(end) => &**end,
        }
    }

    /// Whether both are the same object.
    #[must_use]
    pub fn same(&self, other: &Object) -> bool {
        match (self, other) {
            (Object::Socket(a), Object::Socket(b)) => Rc::ptr_eq(a, b),
            (Object::Epoll(a), Object::Epoll(b)) => Rc::ptr_eq(a, b),
            (Object::EventFd(a), Object::EventFd(b)) => Rc::ptr_eq(a, b),
            (Object::Pipe(a), Object::Pipe(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Its identity (the object's address): with a descriptor, what an
    /// epoll entry is keyed by, as Linux keys it by (file, fd).
    #[must_use]
    pub fn identity(&self) -> usize {
        match self {
            Object::Socket(a) => Rc::as_ptr(a).cast::<()>().addr(),
            Object::Epoll(a) => Rc::as_ptr(a).cast::<()>().addr(),
            Object::EventFd(a) => Rc::as_ptr(a).cast::<()>().addr(),
            Object::Pipe(a) => Rc::as_ptr(a).cast::<()>().addr(),
        }
    }

    /// read(2) without blocking: `EAGAIN` when the caller should wait;
    /// `EINVAL` for an epoll set (Linux's answer).
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, isize> {
        match self {
            Object::Socket(socket) => socket.recv(buf, false),
            Object::EventFd(counter) => counter.read(buf),
            Object::Pipe(end) => end.read(buf),
            Object::Epoll(_) => Err(EINVAL),
        }
    }

    /// write(2) without blocking: what went (perhaps less than all),
    /// `EAGAIN` when nothing could.
    pub fn write(&self, bytes: &[u8]) -> Result<usize, isize> {
        match self {
            Object::Socket(socket) => socket.send(bytes),
            Object::EventFd(counter) => counter.write(bytes),
            Object::Pipe(end) => end.write(bytes),
            Object::Epoll(_) => Err(EINVAL),
        }
    }

    fn release(&self) {
        for (epoll, key) in self.pollable().notifier().watchers() {
            epoll.forget(key);
        }
        match self {
            Object::Socket(socket) => socket.release(),
            Object::Epoll(epoll) => epoll.release(),
            Object::Pipe(end) => end.release(),
            Object::EventFd(_) => {}
        }
    }
}

/// The objects of one program, by id.
#[derive(Default)]
pub struct Objects {
    live: BTreeMap<u32, Object>,
    next: u32,
}

impl Objects {
    /// An empty table.
    #[must_use]
    pub fn new() -> Objects {
        Objects::default()
    }

    /// Keeps `object`; its id. `EMFILE` if every id is taken.
    pub fn insert(&mut self, object: Object) -> Result<u32, isize> {
        if self.live.len() >= u32::MAX as usize {
            return Err(EMFILE);
        }
        while self.live.contains_key(&self.next) {
            self.next = self.next.wrapping_add(1);
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.live.insert(id, object);
        Ok(id)
    }

    /// The object `id`, if it lives.
    #[must_use]
    pub fn get(&self, id: u32) -> Option<Object> {
        self.live.get(&id).cloned()
    }

    /// How many objects live.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether none lives.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// The last descriptor of `id` closed: it leaves every epoll set and
    /// ends (a socket's connection closes, a pipe's other end sees it).
    /// Returns the object, to be dropped by the caller once no borrow of
    /// the table is held (a socket's close calls into the stack).
    pub fn remove(&mut self, id: u32) -> Option<Object> {
        self.live.remove(&id)
    }
}

/// One core's objects: those of the program's threads on that core (a
/// multicore Ebb, so each core's table is its own and needs no lock).
#[derive(Default)]
pub struct CoreObjects {
    objects: RefCell<Objects>,
}

impl MulticoreEbb for CoreObjects {
    type Root = ();

    fn create_rep(_root: &'static MulticoreRoot<Self>, _core: CoreId) -> Result<Self, EbbError> {
        Ok(CoreObjects::default())
    }
}

static CORE_OBJECTS: spin::Once<EbbRef<Multicore<CoreObjects>>> = spin::Once::new();

/// Runs `work` on this core's objects; `None` off an Ebbflow core. The
/// borrow ends with `work`: do not call into the network inside it.
pub fn with_here<R>(work: impl FnOnce(&mut Objects) -> R) -> Option<R> {
    let ebb = CORE_OBJECTS.try_call_once(|| Multicore::create(())).ok()?;
    let here = ebb.get().ok()?;
    let mut objects = here.objects.try_borrow_mut().ok()?;
    Some(work(&mut objects))
}

/// Ends `object` (after [`Objects::remove`]).
pub fn release(object: &Object) {
    object.release();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoll::EPOLL_CTL_ADD;
    use crate::readiness::EPOLLIN;

    #[test]
    fn a_released_object_leaves_the_epoll_sets_watching_it() {
        let mut objects = Objects::new();
        let epoll = Epoll::new();
        let counter = Rc::new(EventFd::new(1, 0));
        let object = Object::EventFd(Rc::clone(&counter));
        let id = objects.insert(object.clone()).unwrap();
        epoll
            .control(EPOLL_CTL_ADD, 3, &object, EPOLLIN, 9)
            .unwrap();
        assert_eq!(epoll.collect(4), [(EPOLLIN, 9)]);
        let removed = objects.remove(id).unwrap();
        release(&removed);
        assert!(epoll.collect(4).is_empty());
        assert!(objects.get(id).is_none());
        drop((removed, object));
        // The set held the last other reference.
        assert_eq!(Rc::strong_count(&counter), 1);
    }

    #[test]
    fn ids_are_not_reused_while_alive() {
        let mut objects = Objects::new();
        let a = objects
            .insert(Object::EventFd(Rc::new(EventFd::new(0, 0))))
            .unwrap();
        let b = objects
            .insert(Object::EventFd(Rc::new(EventFd::new(0, 0))))
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(objects.len(), 2);
    }
}
