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

/// Another tenant's item, to number between one tenant's items.
fn others(n: u32) -> FeedBody {
    FeedBody::Event(Event::new(
        MowerId(uuid::Uuid::from_u128(2)),
        AccountId(uuid::Uuid::from_u128(2)),
        Utc.with_ymd_and_hms(2026, 5, 1, 11, 0, n % 60).unwrap(),
        EventDetail::MowingStarted {},
    ))
}

/// The number an id carries after the feed's name.
fn number(id: &str) -> u64 {
    u64::from_str_radix(id.rsplit_once('-').unwrap().1, 16).unwrap()
}

#[test]
fn ids_hide_the_sequence_and_map_back_to_it() {
    let key = ids::IdKey::random();
    let hidden: Vec<u64> = (0..2000).map(|seq| key.hide(seq)).collect();
    for (seq, id) in hidden.iter().enumerate() {
        assert_eq!(
            key.reveal(*id),
            seq as u64,
            "a permutation: every id maps back"
        );
    }
    let distinct: std::collections::HashSet<u64> = hidden.iter().copied().collect();
    assert_eq!(distinct.len(), hidden.len());
    // Consecutive sequences give unrelated numbers: neither ordered nor a constant step.
    let rising = hidden.windows(2).filter(|w| w[0] < w[1]).count();
    assert!((800..1200).contains(&rising), "{rising} of 1999 steps rise");
    let steps: std::collections::HashSet<u64> =
        hidden.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    assert!(steps.len() > 1900, "{} distinct steps", steps.len());
}

/// A tenant's ids tell nothing of the traffic between its items: the same two of its items
/// carry numbers that do not follow the sequence, whether 1 or 500 items of another tenant came
/// between them, and a resume from the first still gives exactly what came after it.
#[tokio::test]
async fn a_tenants_ids_do_not_count_other_tenants_items_and_resume_stays_exact() {
    let feed = feed(1000);
    let mut ids = Vec::new();
    for gap in [1u32, 500] {
        push(&feed.shared, event(0));
        let first = feed.event_id(feed.shared.ring.lock().unwrap().next_seq - 1);
        for n in 0..gap {
            push(&feed.shared, others(n));
        }
        push(&feed.shared, event(1));
        let second = feed.event_id(feed.shared.ring.lock().unwrap().next_seq - 1);
        ids.push((first, second));
    }
    for (first, second) in &ids {
        let (a, b) = (number(first), number(second));
        assert!(
            ![2, 501].contains(&b.wrapping_sub(a)),
            "the difference of two ids is not the number of items between them: {first} {second}"
        );
    }
    // Resuming after the first item of the second round: the other tenant's 500 and the second.
    let mut cursor = feed.cursor(Some(&ids[1].0));
    let got = seqs(&mut cursor, 501).await;
    let start = feed.shared.ring.lock().unwrap().next_seq - 501;
    let expected: Vec<String> = (start..start + 501).map(|s| s.to_string()).collect();
    assert_eq!(got, expected, "exactly the items after the id, in order");
}
