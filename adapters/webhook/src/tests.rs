use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn private_and_special_addresses_are_forbidden() {
    for text in [
        "127.0.0.1",
        "127.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "169.254.0.1",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fd00:ec2::254",
        "fc00::1",
        "fe80::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a00:1",
    ] {
        assert!(forbidden(ip(text)), "{text} must be refused");
    }
    for text in [
        "1.1.1.1",
        "8.8.8.8",
        "172.32.0.1",
        "172.15.255.255",
        "192.169.0.1",
        "2606:4700:4700::1111",
        "64:ff9b::808:808",
    ] {
        assert!(!forbidden(ip(text)), "{text} is public");
    }
}

fn sender() -> HttpSender {
    HttpSender::new(SenderSettings {
        connect_timeout: Duration::from_secs(1),
        total_timeout: Duration::from_secs(2),
        allow_private: false,
    })
    .unwrap()
}

async fn send(url: &str) -> SendResult {
    sender().send(url, Vec::new(), "{}".to_owned()).await
}

/// URLs naming private addresses are refused before any connection, and so is plain `http`.
#[tokio::test]
async fn literal_private_hosts_and_http_are_refused() {
    for url in [
        "https://127.0.0.1/hook",
        "https://[::1]/hook",
        "https://10.1.2.3/hook",
        "https://172.16.5.4/hook",
        "https://192.168.0.10/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fd00:ec2::254]/hook",
        "http://example.com/hook",
    ] {
        assert!(
            matches!(send(url).await, SendResult::Refused(_)),
            "{url} must be refused"
        );
    }
}

/// A name that resolves to loopback is refused by the resolver (`localhost` resolves without any
/// network).
#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused() {
    match send("https://localhost:9/hook").await {
        SendResult::Refused(why) => assert!(why.contains("localhost"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A loopback server that answers every request with `answer` and counts its connections.
async fn raw_server(answer: String) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, hits)
}

/// A redirect (to loopback) is an answer, never followed: even with private addresses allowed,
/// the target is never reached.
#[tokio::test]
async fn a_redirect_to_loopback_is_not_followed() {
    let (target, target_hits) =
        raw_server("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned())
            .await;
    let (redirector, _) = raw_server(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{target}/inside\r\n\
         content-length: 0\r\nconnection: close\r\n\r\n"
    ))
    .await;
    let sender = HttpSender::new(SenderSettings {
        allow_private: true,
        ..SenderSettings::default()
    })
    .unwrap();
    let result = sender
        .send(
            &format!("http://{redirector}/hook"),
            Vec::new(),
            "{}".to_owned(),
        )
        .await;
    assert_eq!(result, SendResult::Answered(307));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(target_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// An answer with a huge body is still an answer: its body is read up to the cap, then dropped.
#[tokio::test]
async fn a_huge_answer_is_read_up_to_the_cap() {
    let (server, _) = raw_server(format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        10 * BODY_CAP_BYTES,
        "x".repeat(10 * BODY_CAP_BYTES)
    ))
    .await;
    let sender = HttpSender::new(SenderSettings {
        allow_private: true,
        ..SenderSettings::default()
    })
    .unwrap();
    let result = sender
        .send(
            &format!("http://{server}/hook"),
            Vec::new(),
            "{}".to_owned(),
        )
        .await;
    assert_eq!(result, SendResult::Answered(200));
}
