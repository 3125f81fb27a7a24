//! The sender ignores every proxy variable (issue 42, item 1): through a proxy, the proxy resolves
//! the endpoint's name and connects, so the checking resolver would see only the proxy's address.
//!
//! A test binary of its own: environment variables are process-wide, and this is the only test
//! that sets them.

use std::net::TcpListener;
use std::time::Duration;
use swath_application::ports::{SendResult, WebhookSender};
use swath_webhook_http::{HttpSender, SenderSettings};

/// Every variable reqwest (or libcurl-minded tooling) reads a proxy from.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// A loopback listener standing in for a proxy: it never accepts, so a connection made to it
/// waits in its backlog, where [`connections`] finds it without any waiting.
fn proxy() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    for name in PROXY_VARIABLES {
        std::env::set_var(name, &url);
    }
    for name in ["NO_PROXY", "no_proxy", "REQUEST_METHOD"] {
        std::env::remove_var(name);
    }
    listener
}

/// How many connections reached the proxy. A client's `connect` has completed before its request
/// settles, and a completed connection is in the listener's backlog from then on.
fn connections(proxy: &TcpListener) -> usize {
    let mut count = 0;
    while proxy.accept().is_ok() {
        count += 1;
    }
    count
}

fn sender(allow_private: bool) -> HttpSender {
    HttpSender::new(SenderSettings {
        connect_timeout: Duration::from_secs(1),
        total_timeout: Duration::from_secs(2),
        allow_private,
    })
    .unwrap()
}

#[tokio::test]
async fn proxy_variables_are_ignored() {
    let proxy = proxy();

    // `localhost` resolves to loopback without any network: the checking resolver refuses it.
    // Through the proxy it would have been a `CONNECT localhost:9` the guard never saw.
    let refused = sender(false)
        .send("https://localhost:9/hook", Vec::new(), "{}".to_owned())
        .await;
    assert!(
        matches!(&refused, SendResult::Refused(why) if why.contains("localhost")),
        "a name resolving to loopback is refused by the resolver, got {refused:?}"
    );
    assert_eq!(connections(&proxy), 0, "the proxy was asked to connect");

    // With private targets allowed, the delivery goes straight to its endpoint, not to the proxy.
    let endpoint = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = endpoint.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = endpoint.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = socket.read(&mut buffer).await;
            let _ = socket
                .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                .await;
        }
    });
    let answered = sender(true)
        .send(
            &format!("http://{address}/hook"),
            Vec::new(),
            "{}".to_owned(),
        )
        .await;
    assert_eq!(answered, SendResult::Answered(204));
    assert_eq!(
        connections(&proxy),
        0,
        "the delivery went through the proxy"
    );
}
