//! A TCP proxy in front of a server, which a test cuts the way a failover does (issue 44): it
//! forwards, swallows everything (a primary gone with its connections half-open), or refuses (a
//! router with no server behind its port); healing cuts the connections it held, as the router
//! does with a dead primary's sessions (`on-marked-down shutdown-sessions`), and forwards again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Forward,
    Blackhole,
    Refuse,
}

/// The proxy (see the module); stopped when dropped.
pub struct Proxy {
    addr: SocketAddr,
    /// The mode, and a generation that every cut raises: a connection ends when it changes.
    state: watch::Sender<(Mode, u64)>,
    forwarded: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free local port to the host and port of `url` (`scheme://user@host:port/…`).
    pub async fn start(url: &str) -> Proxy {
        let target = target_of(url);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let (state, _) = watch::channel((Mode::Forward, 0));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn({
            let state = state.clone();
            let forwarded = forwarded.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let watcher = state.subscribe();
                    let mode = watcher.borrow().0;
                    match mode {
                        Mode::Refuse => drop(client),
                        Mode::Blackhole => {
                            tokio::spawn(hold(client, watcher));
                        }
                        Mode::Forward => {
                            forwarded.fetch_add(1, Ordering::SeqCst);
                            tokio::spawn(forward(client, target.clone(), watcher));
                        }
                    }
                }
            }
        });
        Proxy {
            addr,
            state,
            forwarded,
            accept,
        }
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let target = target_of(url);
        url.replacen(&target, &self.addr.to_string(), 1)
    }

    /// Connections forwarded so far.
    pub fn connections(&self) -> usize {
        self.forwarded.load(Ordering::SeqCst)
    }

    /// Nothing is forwarded any more, on the open connections or new ones; none is closed.
    pub fn blackhole(&self) {
        self.set(Mode::Blackhole);
    }

    /// Every connection is closed, and new ones at once.
    pub fn refuse(&self) {
        self.set(Mode::Refuse);
    }

    /// Every connection held is closed; new ones are forwarded.
    pub fn heal(&self) {
        self.set(Mode::Forward);
    }

    fn set(&self, mode: Mode) {
        self.state.send_modify(|(m, generation)| {
            *m = mode;
            *generation += 1;
        });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.refuse();
    }
}

/// `host:port` of a URL.
fn target_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:5432")
    }
}

/// Holds a connection without reading or answering, until the next cut.
async fn hold(client: TcpStream, mut state: watch::Receiver<(Mode, u64)>) {
    let _ = state.changed().await;
    drop(client);
}

/// Forwards both ways until either side closes or the proxy is cut: a blackhole keeps both
/// sockets open and silent until the next cut, anything else closes them.
async fn forward(mut client: TcpStream, target: String, mut state: watch::Receiver<(Mode, u64)>) {
    let Ok(mut server) = TcpStream::connect(&target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = state.changed() => {
            if state.borrow().0 == Mode::Blackhole {
                let _ = state.changed().await;
            }
        }
    }
}
