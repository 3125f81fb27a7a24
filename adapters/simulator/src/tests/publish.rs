use super::*;

/// A bus that records what is published, or refuses everything.
type RecordingBus = PublishOnly<Recording>;

#[derive(Default)]
struct Recording {
    published: Mutex<Vec<(String, Bytes, Option<String>)>>,
    down: bool,
}

impl Publisher for Recording {
    const REFUSAL: &'static str = "not in this test";

    fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        if self.down {
            return Err(BusError::Unavailable("down for the test".into()));
        }
        self.published
            .lock()
            .unwrap()
            .push((subject.to_owned(), payload, dedup_id));
        Ok(())
    }
}

async fn wait_for(bus: &RecordingBus, count: usize) {
    for _ in 0..500 {
        if bus.published.lock().unwrap().len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {count} messages were published");
}

#[tokio::test]
async fn the_simulator_publishes_every_mower_on_its_subject_until_stopped() {
    let fleet = fleet(4).await;
    let bus = Arc::new(RecordingBus::default());
    let clock = Arc::new(ManualClock::new(start()));
    let (stop_tx, stop) = watch::channel(false);
    let settings = SimulatorSettings {
        mowers: 4,
        state_period: Duration::from_millis(50),
        seed: Some(11),
    };
    let task = Simulator::spawn(bus.clone(), clock.clone(), &fleet, settings, stop);

    // The first tick reports every mower; the clock stands still, so nothing more is due.
    wait_for(&bus, 4).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(bus.published.lock().unwrap().len(), 4);
    clock.advance(chrono::Duration::seconds(1));
    wait_for(&bus, 8).await;

    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .unwrap()
        .unwrap();

    let published = bus.published.lock().unwrap();
    assert_eq!(published.len(), 8);
    let mut ids = HashSet::new();
    for (subject, payload, dedup_id) in published.iter() {
        let report = StateReport::parse(payload, clock.now()).unwrap();
        assert!(fleet
            .mowers
            .iter()
            .any(|m| m.id == report.mower_id && m.account_id == report.account_id));
        assert_eq!(subject, &subjects::telemetry(report.mower_id));
        let expected = format!(
            "{}.{}",
            report.mower_id,
            report.observed_at.timestamp_micros()
        );
        assert_eq!(dedup_id.as_deref(), Some(expected.as_str()));
        assert!(ids.insert(expected), "de-duplication ids are unique");
    }
}

#[tokio::test]
async fn publish_failures_do_not_stop_the_simulator() {
    let fleet = fleet(2).await;
    let bus = Arc::new(PublishOnly(Recording {
        down: true,
        ..Recording::default()
    }));
    let clock = Arc::new(ManualClock::new(start()));
    let (stop_tx, stop) = watch::channel(false);
    let settings = SimulatorSettings {
        mowers: 2,
        state_period: Duration::from_millis(20),
        seed: Some(1),
    };
    let task = Simulator::spawn(bus, clock.clone(), &fleet, settings, stop);
    for _ in 0..5 {
        clock.advance(chrono::Duration::seconds(1));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(!task.is_finished(), "the simulator carries on");
    drop(stop_tx);
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .unwrap()
        .unwrap();
}
