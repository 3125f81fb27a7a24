use super::*;
use chrono::{TimeZone, Utc};
use swath_domain::watch::EventDetail;

fn feed(capacity: usize) -> LiveFeed {
    LiveFeed {
        shared: Shared::new(capacity),
        _tasks: Arc::new(Tasks(Vec::new())),
    }
}

fn event(n: u32) -> FeedBody {
    FeedBody::Event(Event::new(
        MowerId(uuid::Uuid::nil()),
        AccountId(uuid::Uuid::nil()),
        Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, n).unwrap(),
        EventDetail::MowingStarted {},
    ))
}

async fn seqs(cursor: &mut Cursor, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(match cursor.next().await.unwrap() {
            Delivery::Item(i) => i.seq.to_string(),
            Delivery::Reset { reason, head } => format!("reset:{}:{head}", reason.as_str()),
        });
    }
    out
}

#[tokio::test]
async fn a_cursor_resumes_after_its_id_within_the_window_and_then_goes_live() {
    let feed = feed(10);
    for n in 0..5 {
        push(&feed.shared, event(n));
    }
    let mut cursor = feed.cursor(Some(&feed.event_id(2)));
    push(&feed.shared, event(5));
    assert_eq!(seqs(&mut cursor, 4).await, ["3", "4", "5", "6"]);
}

#[tokio::test]
async fn a_cursor_without_an_id_starts_at_the_next_item() {
    let feed = feed(10);
    push(&feed.shared, event(0));
    let mut cursor = feed.cursor(None);
    push(&feed.shared, event(1));
    assert_eq!(seqs(&mut cursor, 1).await, ["2"]);
}

#[tokio::test]
async fn an_id_of_another_feed_or_older_than_the_window_is_a_reset() {
    let feed = feed(3);
    for n in 0..6 {
        push(&feed.shared, event(n));
    }
    // Items 4..=6 are kept: resuming after 3 loses nothing, after 2 would lose item 3.
    let mut cursor = feed.cursor(Some(&feed.event_id(3)));
    assert_eq!(seqs(&mut cursor, 3).await, ["4", "5", "6"]);
    let mut cursor = feed.cursor(Some(&feed.event_id(2)));
    push(&feed.shared, event(6));
    assert_eq!(seqs(&mut cursor, 2).await, ["reset:window_exceeded:6", "7"]);
    for id in [
        "0123456789abcdef-5".to_owned(),
        "nonsense".into(),
        feed.event_id(99),
    ] {
        let mut cursor = feed.cursor(Some(&id));
        assert_eq!(seqs(&mut cursor, 1).await, ["reset:unknown_id:7"], "{id}");
    }
}

#[tokio::test]
async fn a_slow_cursor_catches_up_from_the_ring_or_is_reset() {
    let feed = feed(FANOUT_BUFFER * 3);
    let mut slow = feed.cursor(None);
    for n in 0..(FANOUT_BUFFER * 2) as u32 {
        push(&feed.shared, event(n % 60));
    }
    let got = seqs(&mut slow, FANOUT_BUFFER * 2).await;
    let expected: Vec<String> = (1..=FANOUT_BUFFER * 2).map(|s| s.to_string()).collect();
    assert_eq!(got, expected, "caught up from the ring, nothing lost");

    let small = self::feed(FANOUT_BUFFER);
    let mut slow = small.cursor(None);
    for n in 0..(FANOUT_BUFFER * 2) as u32 {
        push(&small.shared, event(n % 60));
    }
    let first = seqs(&mut slow, 1).await;
    assert_eq!(
        first,
        [format!("reset:window_exceeded:{}", FANOUT_BUFFER * 2)]
    );
}
