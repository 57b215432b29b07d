//! Two cores, clients on both, hammering overlapping keys: every value read
//! must be one that some client wrote, whole.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread;

/// A value that says who wrote it and checks itself: "w<writer>-s<seq>-"
/// followed by a pad whose length and byte depend on both.
fn value_of(writer: u64, seq: u64) -> Vec<u8> {
    let mut value = format!("w{writer}-s{seq}-").into_bytes();
    let pad = usize::try_from((writer * 31 + seq) % 500).unwrap();
    value.extend(std::iter::repeat_n(
        b'a' + u8::try_from((writer + seq) % 26).unwrap(),
        pad,
    ));
    value
}

fn well_formed(value: &[u8]) -> bool {
    let text = String::from_utf8_lossy(value);
    let Some(rest) = text.strip_prefix('w') else {
        return false;
    };
    let mut parts = rest.splitn(3, '-');
    let (Some(writer), Some(seq)) = (parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(writer), Some(Ok(seq))) = (
        writer.parse::<u64>(),
        seq.strip_prefix('s').map(str::parse::<u64>),
    ) else {
        return false;
    };
    value == value_of(writer, seq).as_slice()
}

fn read_line(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line
}

#[test]
fn clients_on_both_cores_read_only_values_that_were_written() {
    let server = Arc::new(common::start_ours(&["-t", "2"]));
    let port = server.port;
    let workers: Vec<_> = (0..4u64)
        .map(|writer| {
            thread::spawn(move || {
                let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                stream.set_nodelay(true).unwrap();
                let mut writer_stream = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                let mut state = writer * 7919 + 1;
                let (mut gets, mut hits, mut bad) = (0, 0, 0);
                for seq in 0..3000u64 {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Key and operation from different bits, so every key sees every operation.
                    let key = format!("shared-{}", (state >> 8) % 16);
                    match state % 4 {
                        0 | 1 => {
                            gets += 1;
                            writer_stream
                                .write_all(format!("get {key}\r\n").as_bytes())
                                .unwrap();
                            let line = read_line(&mut reader);
                            if line.starts_with("VALUE ") {
                                let len: usize =
                                    line.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
                                let mut data = vec![0; len + 2];
                                reader.read_exact(&mut data).unwrap();
                                hits += 1;
                                if !well_formed(&data[..len]) {
                                    bad += 1;
                                }
                                assert_eq!(read_line(&mut reader), "END\r\n");
                            } else {
                                assert_eq!(line, "END\r\n");
                            }
                        }
                        2 => {
                            let data = value_of(writer, seq);
                            let mut request =
                                format!("set {key} 0 0 {}\r\n", data.len()).into_bytes();
                            request.extend_from_slice(&data);
                            request.extend_from_slice(b"\r\n");
                            writer_stream.write_all(&request).unwrap();
                            assert_eq!(read_line(&mut reader), "STORED\r\n");
                        }
                        _ => {
                            writer_stream
                                .write_all(format!("delete {key}\r\n").as_bytes())
                                .unwrap();
                            let line = read_line(&mut reader);
                            assert!(line == "DELETED\r\n" || line == "NOT_FOUND\r\n", "{line}");
                        }
                    }
                }
                (gets, hits, bad)
            })
        })
        .collect();
    let mut totals = (0, 0, 0);
    for worker in workers {
        let (gets, hits, bad) = worker.join().unwrap();
        totals = (totals.0 + gets, totals.1 + hits, totals.2 + bad);
    }
    drop(server);
    assert!(totals.1 > 100, "too few hits to mean anything: {totals:?}");
    assert_eq!(
        totals.2, 0,
        "{} reads returned a value nobody wrote",
        totals.2
    );
}
