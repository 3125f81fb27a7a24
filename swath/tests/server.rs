//! The HTTP server loop (`swath_api::server`) over real sockets on 127.0.0.1: a client that
//! sends a head too slowly, sends nothing, or keeps an idle connection is cut off; the connection
//! limit holds; oversized heads answer problems. Timeouts are small here; the tests wait for the
//! connection to close (bounded by a generous patience) and never assert how long it took.

mod helpers;

use helpers::TestApp;
use std::time::Duration;
use swath_api::server::{serve, HttpLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// How long a test waits for something that should happen well within it.
const PATIENCE: Duration = Duration::from_secs(20);

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(limits: HttpLimits) -> Server {
        // The router gets the same limits, as `swath serve` gives them.
        let app = TestApp::spawn_configured(100, |state| state.with_http_limits(&limits)).await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, app.router, limits, async move {
            let _ = stopped.await;
        }));
        Server {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
    }
}

fn short(header_read: u64, idle: u64) -> HttpLimits {
    HttpLimits {
        header_read_timeout: Duration::from_millis(header_read),
        idle_timeout: Duration::from_millis(idle),
        max_connections: 16,
        ..HttpLimits::default()
    }
}

/// Reads until the server closes the connection (or an error); what was read.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the server closed the connection");
    all
}

/// Reads one response head and its body (by `content-length`), leaving the connection open.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        assert!(n > 0, "closed before a whole response");
        all.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if all.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn a_partial_head_is_cut_off_after_the_header_read_timeout() {
    let server = Server::start(short(300, 60_000)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: swath\r\nX-Slow: ")
        .await
        .unwrap();
    let answer = read_until_closed(&mut stream).await;
    assert!(
        answer.is_empty(),
        "a half-sent head got an answer: {}",
        String::from_utf8_lossy(&answer)
    );
    server.stop().await;
}

#[tokio::test]
async fn a_trickling_head_is_cut_off_too() {
    let server = Server::start(short(300, 60_000)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    // One byte at a time, each well within the timeout: the head as a whole is not.
    let head =
        b"GET /healthz HTTP/1.1\r\nHost: swath\r\nX-Slow: abcdefghijklmnopqrstuvwxyz\r\n\r\n";
    let mut closed = false;
    for byte in head {
        if stream.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !closed {
        let answer = read_until_closed(&mut stream).await;
        assert!(
            answer.is_empty(),
            "a trickled head got an answer: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_silent_connection_is_cut_off() {
    let server = Server::start(short(300, 60_000)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    assert!(read_until_closed(&mut stream).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_its_requests() {
    let server = Server::start(short(60_000, 1_000)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    for _ in 0..2 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: swath\r\n\r\n")
            .await
            .unwrap();
        let response = read_response(&mut stream).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    assert!(read_until_closed(&mut stream).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_for_one_to_close() {
    let server = Server::start(HttpLimits {
        header_read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        max_connections: 1,
        ..HttpLimits::default()
    })
    .await;
    let mut first = TcpStream::connect(server.addr).await.unwrap();
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: swath\r\n\r\n")
        .await
        .unwrap();
    assert!(read_response(&mut first).await.starts_with("HTTP/1.1 200"));
    let mut second = TcpStream::connect(server.addr).await.unwrap();
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: swath\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), second.read(&mut buf))
            .await
            .is_err(),
        "a connection beyond the limit was served"
    );
    drop(first);
    let answer = read_until_closed(&mut second).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn oversized_heads_answer_problems() {
    let server = Server::start(short(10_000, 10_000)).await;
    let long_uri = format!("/healthz?{}", "a".repeat(swath_api::server::MAX_URI_BYTES));
    let many_headers: String = (0..=swath_api::server::MAX_HEADERS)
        .map(|i| format!("X-H{i}: v\r\n"))
        .collect();
    for (head, status) in [
        (
            format!("GET {long_uri} HTTP/1.1\r\nHost: swath\r\nConnection: close\r\n\r\n"),
            "414",
        ),
        (
            format!(
                "GET /healthz HTTP/1.1\r\nHost: swath\r\n{many_headers}Connection: close\r\n\r\n"
            ),
            "431",
        ),
    ] {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{answer}"
        );
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("content-type: application/problem+json"),
            "{answer}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_long_response_is_not_cut_by_the_timeouts() {
    // The live stream holds its connection for as long as it runs; here a request whose
    // response outlasts both timeouts several times still completes.
    let server = Server::start(short(500, 500)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /v1/live/stream HTTP/1.1\r\nHost: swath\r\nAuthorization: Bearer {}\r\n\r\n",
                helpers::TOKEN_A
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Still open well past both timeouts: a read times out instead of seeing the end.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let more = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await;
    assert!(
        !matches!(more, Ok(Ok(0))),
        "the live stream's connection was closed by the idle timeout"
    );
    drop(stream);
    server.stop().await;
}

#[tokio::test]
async fn behind_tls_the_live_pages_cookie_is_secure() {
    let server = Server::start(HttpLimits {
        behind_tls: true,
        ..short(10_000, 10_000)
    })
    .await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /live/fleet HTTP/1.1\r\nHost: swath\r\nOrigin: https://swath\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\ntoken={}",
                "token=".len() + helpers::TOKEN_A.len(),
                helpers::TOKEN_A
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
    let cookie = answer
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie: {answer}"));
    assert!(cookie.contains("; Secure"), "{cookie}");
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_stops_coming_is_cut_and_its_connection_closed() {
    let server = Server::start(HttpLimits {
        body_idle_timeout: Duration::from_millis(300),
        ..short(10_000, 10_000)
    })
    .await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    // A head announcing 100 bytes, then 10 of them, then silence.
    stream
        .write_all(
            format!(
                "POST /v1/states HTTP/1.1\r\nHost: swath\r\nAuthorization: Bearer {}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n[{{\"mower",
                helpers::TOKEN_A_ADMIN
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("no byte of the body came for 0.3 s"),
        "{answer}"
    );
    server.stop().await;
}
