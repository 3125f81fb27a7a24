use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Each forbidden block of the IANA special-purpose registries (and multicast, and IPv6 outside
/// 2000::/3): its first and last address are refused, the public addresses just outside it are
/// not. Written out by hand, not derived from the implementation's table.
#[test]
fn each_special_purpose_block_is_forbidden_and_its_neighbours_are_not() {
    // (block, inside, just outside and public)
    let table: &[(&str, &[&str], &[&str])] = &[
        ("0.0.0.0/8", &["0.0.0.0", "0.255.255.255"], &["1.0.0.0"]),
        (
            "10.0.0.0/8",
            &["10.0.0.0", "10.255.255.255"],
            &["9.255.255.255", "11.0.0.0"],
        ),
        (
            "100.64.0.0/10",
            &["100.64.0.0", "100.127.255.255"],
            &["100.63.255.255", "100.128.0.0"],
        ),
        (
            "127.0.0.0/8",
            &["127.0.0.1", "127.255.255.255"],
            &["126.255.255.255", "128.0.0.0"],
        ),
        (
            "169.254.0.0/16",
            &["169.254.0.0", "169.254.169.254", "169.254.255.255"],
            &["169.253.255.255", "169.255.0.0"],
        ),
        (
            "172.16.0.0/12",
            &["172.16.0.0", "172.31.255.255"],
            &["172.15.255.255", "172.32.0.0"],
        ),
        (
            "192.0.0.0/24",
            &["192.0.0.0", "192.0.0.9", "192.0.0.255"],
            &["191.255.255.255", "192.0.1.0"],
        ),
        (
            "192.0.2.0/24",
            &["192.0.2.0", "192.0.2.255"],
            &["192.0.1.255", "192.0.3.0"],
        ),
        (
            "192.88.99.0/24",
            &["192.88.99.0", "192.88.99.255"],
            &["192.88.98.255", "192.88.100.0"],
        ),
        (
            "192.168.0.0/16",
            &["192.168.0.0", "192.168.255.255"],
            &["192.167.255.255", "192.169.0.0"],
        ),
        (
            "198.18.0.0/15",
            &["198.18.0.0", "198.19.255.255"],
            &["198.17.255.255", "198.20.0.0"],
        ),
        (
            "198.51.100.0/24",
            &["198.51.100.0", "198.51.100.255"],
            &["198.51.99.255", "198.51.101.0"],
        ),
        (
            "203.0.113.0/24",
            &["203.0.113.0", "203.0.113.255"],
            &["203.0.112.255", "203.0.114.0"],
        ),
        (
            "224.0.0.0/4",
            &["224.0.0.0", "239.255.255.255"],
            &["223.255.255.255"],
        ),
        ("240.0.0.0/4", &["240.0.0.0", "255.255.255.255"], &[]),
        ("::/128", &["::"], &[]),
        ("::1/128", &["::1"], &[]),
        (
            "::ffff:0:0/96",
            &["::ffff:0.0.0.0", "::ffff:127.0.0.1", "::ffff:8.8.8.8"],
            &[],
        ),
        (
            "::ffff:0:0:0/96",
            &["::ffff:0:0.0.0.0", "::ffff:0:8.8.8.8"],
            &[],
        ),
        (
            "::/96 (IPv4-compatible)",
            &["::127.0.0.1", "::8.8.8.8"],
            &[],
        ),
        (
            "64:ff9b::/96, private IPv4",
            &[
                "64:ff9b::10.0.0.1",
                "64:ff9b::127.0.0.1",
                "64:ff9b::198.18.0.1",
            ],
            &["64:ff9b::8.8.8.8"],
        ),
        (
            "64:ff9b:1::/48",
            &[
                "64:ff9b:1::",
                "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
                "64:ff9b:1::8.8.8.8",
            ],
            &[],
        ),
        ("100::/64", &["100::", "100::ffff:ffff:ffff:ffff"], &[]),
        (
            "2001::/23",
            &[
                "2001::",
                "2001:1::1",
                "2001:2::1",
                "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
            &["2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:200::"],
        ),
        (
            "2001:db8::/32",
            &["2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"],
            &["2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::"],
        ),
        (
            "2002::/16, private IPv4",
            &["2002:a00:1::", "2002:7f00:1::1", "2002:c0a8:101::"],
            &["2002:808:808::1"],
        ),
        (
            "3fff::/20",
            &["3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff"],
            &["3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "3fff:1000::"],
        ),
        (
            "5f00::/16",
            &["5f00::", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
            &[],
        ),
        (
            "fc00::/7",
            &[
                "fc00::",
                "fd00:ec2::254",
                "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
            &[],
        ),
        (
            "fe80::/10",
            &["fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
            &[],
        ),
        ("fec0::/10", &["fec0::1"], &[]),
        ("ff00::/8", &["ff02::1", "ff0e::1"], &[]),
        (
            "outside 2000::/3",
            &["1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "4000::"],
            &["2000::", "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
        ),
    ];
    for (block, inside, outside) in table {
        for text in *inside {
            assert!(forbidden(ip(text)), "{text} ({block}) must be refused");
        }
        for text in *outside {
            assert!(!forbidden(ip(text)), "{text} (next to {block}) is public");
        }
    }
    for text in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"] {
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
