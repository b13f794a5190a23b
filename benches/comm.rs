//! Ping-pong latency and bandwidth of the rank-to-rank transport, against a
//! raw socket copy measured side by side in the same run.
//!
//! Two ranks (threads, each with its own background runtime, as in separate
//! rank processes) bounce one message back and forth. The raw baseline is
//! the same exchange with `write_all`/`read_exact` on a connected socket pair
//! of the same kind. Run: `cargo bench --bench comm`.

use frame::comm::net::{listen, Bind, Endpoint, Hub, NetComm, Security};
use frame::comm::Comm;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SIZES: [usize; 9] = [
    8,
    64,
    512,
    4 << 10,
    32 << 10,
    256 << 10,
    2 << 20,
    16 << 20,
    64 << 20,
];

fn reps(size: usize) -> usize {
    match size {
        0..=4096 => 2000,
        4097..=300_000 => 300,
        300_001..=4_000_000 => 40,
        _ => 6,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One-way time of a message of `size` bytes (half a round trip), median of trials.
fn netcomm(tcp: bool, size: usize, dir: &std::path::Path) -> Duration {
    let runtimes: Vec<tokio::runtime::Runtime> = (0..2)
        .map(|_| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime")
        })
        .collect();
    let hubs: Vec<Arc<Hub>> = (0..2).map(|_| Hub::new()).collect();
    let security = Security::generate().expect("secret");
    let table: Vec<Endpoint> = (0..2)
        .map(|r| {
            let bind = if tcp {
                Bind::Tcp(std::net::Ipv4Addr::LOCALHOST.into())
            } else {
                Bind::Unix(dir.join(format!("bench-{r}.sock")))
            };
            runtimes[r]
                .block_on(listen(bind, Arc::clone(&hubs[r]), Arc::clone(&security)))
                .expect("listen")
        })
        .collect();
    let table = Arc::new(table);
    let n = reps(size);
    // Warm up: open the connections and touch the buffers once.
    std::thread::scope(|s| {
        let (hub, t, sec) = (
            Arc::clone(&hubs[1]),
            Arc::clone(&table),
            Arc::clone(&security),
        );
        s.spawn(move || {
            let c = NetComm::new(1, 1, 1, hub, t, sec);
            let m = c.recv(0, 1).expect("recv");
            c.send(0, 2, &m).expect("send");
        });
        let c = NetComm::new(
            0,
            0,
            1,
            Arc::clone(&hubs[0]),
            Arc::clone(&table),
            Arc::clone(&security),
        );
        c.send(1, 1, &vec![0u8; size]).expect("send");
        c.recv(1, 2).expect("recv");
    });
    let trials: Vec<Duration> = (0..5)
        .map(|_| {
            let payload = vec![7u8; size];
            std::thread::scope(|s| {
                let echo = {
                    let (hub, table, sec) = (
                        Arc::clone(&hubs[1]),
                        Arc::clone(&table),
                        Arc::clone(&security),
                    );
                    s.spawn(move || {
                        let c = NetComm::new(1, 1, 1, hub, table, sec);
                        for _ in 0..n {
                            let m = c.recv(0, 1).expect("recv");
                            c.send(0, 2, &m).expect("send");
                        }
                    })
                };
                let c = NetComm::new(
                    0,
                    0,
                    1,
                    Arc::clone(&hubs[0]),
                    Arc::clone(&table),
                    Arc::clone(&security),
                );
                let t = Instant::now();
                for _ in 0..n {
                    c.send(1, 1, &payload).expect("send");
                    let back = c.recv(1, 2).expect("recv");
                    assert_eq!(back.len(), size);
                }
                let elapsed = t.elapsed();
                echo.join().expect("echo");
                elapsed / (2 * n as u32)
            })
        })
        .collect();
    median(trials)
}

fn raw_pair<S: Read + Write + Send + 'static>(mut a: S, mut b: S, size: usize) -> Duration {
    let n = reps(size);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; size];
        for _ in 0..n {
            b.read_exact(&mut buf).expect("read");
            b.write_all(&buf).expect("write");
        }
    });
    let data = vec![7u8; size];
    let mut back = vec![0u8; size];
    let t = Instant::now();
    for _ in 0..n {
        a.write_all(&data).expect("write");
        a.read_exact(&mut back).expect("read");
    }
    let elapsed = t.elapsed();
    echo.join().expect("echo");
    elapsed / (2 * n as u32)
}

/// The raw baseline, median of trials.
fn raw(tcp: bool, size: usize) -> Duration {
    median(
        (0..5)
            .map(|_| {
                if tcp {
                    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                    let a = std::net::TcpStream::connect(l.local_addr().expect("addr"))
                        .expect("connect");
                    let (b, _) = l.accept().expect("accept");
                    a.set_nodelay(true).expect("nodelay");
                    b.set_nodelay(true).expect("nodelay");
                    raw_pair(a, b, size)
                } else {
                    let (a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
                    raw_pair(a, b, size)
                }
            })
            .collect(),
    )
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (tcp, name) in [(false, "unix"), (true, "tcp")] {
        println!("transport {name}: one-way time (median of 5 trials), bandwidth, and ratio to a raw socket copy");
        println!(
            "{:>8} | {:>10} {:>10} | {:>10} {:>10} | {:>6}",
            "size", "frame", "GB/s", "raw", "GB/s", "ratio"
        );
        for size in SIZES {
            let f = netcomm(tcp, size, dir.path());
            let r = raw(tcp, size);
            let gb = |d: Duration| size as f64 / d.as_secs_f64() / 1e9;
            println!(
                "{:>8} | {:>8.1}us {:>10.3} | {:>8.1}us {:>10.3} | {:>5.2}x",
                human(size),
                f.as_secs_f64() * 1e6,
                gb(f),
                r.as_secs_f64() * 1e6,
                gb(r),
                r.as_secs_f64() / f.as_secs_f64()
            );
        }
        println!();
    }
}
