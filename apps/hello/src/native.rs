//! `hello` on the native platform: the same application (`hello::say_hello`)
//! with the serial console as its output. Platform options (cores, memory,
//! machine) are the launcher's: `./ebb run hello --native --cores N`.

ebb_native::entry!(main);

fn main(args: &[&str]) -> i32 {
    if args.iter().any(|arg| *arg == "--help" || *arg == "-h") {
        ebb_native::println!("{}", hello::USAGE);
        return 0;
    }
    if let Some(arg) = args.first() {
        ebb_native::println!("hello: unexpected argument '{arg}'\n\n{}", hello::USAGE);
        return 2;
    }
    let console = hello::Console {
        out: |line| ebb_native::println!("{line}"),
        err: |line| ebb_native::println!("{line}"),
    };
    match ebb_native::run(move || hello::say_hello(console)) {
        Ok(code) => code,
        Err(error) => {
            ebb_native::println!("hello: {error}");
            1
        }
    }
}
