use super::*;
use proptest::prelude::*;

fn id(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn endpoint(
    account: u8,
    kinds: Vec<WebhookKind>,
    mowers: Option<Vec<u8>>,
    sites: Option<Vec<u8>>,
    enabled: bool,
) -> Endpoint {
    let now = DateTime::<Utc>::UNIX_EPOCH;
    Endpoint {
        id: WebhookId(id(200)),
        account_id: AccountId(id(account)),
        url: "https://example.com/hook".to_owned(),
        kinds,
        mowers: mowers.map(|m| m.into_iter().map(|n| MowerId(id(n))).collect()),
        sites: sites.map(|s| s.into_iter().map(|n| SiteId(id(n))).collect()),
        enabled,
        disabled_reason: None,
        secrets: Vec::new(),
        created_at: now,
        updated_at: now,
    }
}

fn kind() -> impl Strategy<Value = WebhookKind> {
    prop::sample::select(WebhookKind::all())
}

proptest! {
    /// The rule read directly: every condition is needed and together they suffice.
    #[test]
    fn matches_is_the_conjunction_of_its_filters(
        account in 0u8..2,
        kinds in prop::collection::vec(kind(), 1..4),
        mowers in prop::option::of(prop::collection::vec(10u8..14, 0..3)),
        sites in prop::option::of(prop::collection::vec(20u8..23, 0..3)),
        enabled in any::<bool>(),
        topic_account in 0u8..2,
        topic_kind in kind(),
        topic_mower in 10u8..14,
        topic_site in prop::option::of(20u8..23),
    ) {
        let e = endpoint(account, kinds.clone(), mowers.clone(), sites.clone(), enabled);
        let topic = Topic {
            account_id: AccountId(id(topic_account)),
            mower_id: MowerId(id(topic_mower)),
            site_id: topic_site.map(|n| SiteId(id(n))),
            kind: topic_kind,
        };
        let expected = enabled
            && account == topic_account
            && kinds.contains(&topic_kind)
            && mowers.as_ref().is_none_or(|m| m.contains(&topic_mower))
            && sites.as_ref().is_none_or(|s| topic_site.is_some_and(|t| s.contains(&t)));
        prop_assert_eq!(e.matches(&topic), expected);
    }

    /// Every kind's wire name parses back to it.
    #[test]
    fn kinds_round_trip(k in kind()) {
        prop_assert_eq!(WebhookKind::parse(k.as_str()), Some(k));
    }

    /// The delivery id depends on both the endpoint and the message, and only on them.
    #[test]
    fn delivery_ids_are_stable_and_distinct(a in "[a-z0-9.]{1,20}", b in "[a-z0-9.]{1,20}") {
        let (e1, e2) = (WebhookId(id(1)), WebhookId(id(2)));
        prop_assert_eq!(delivery_id(e1, &a), delivery_id(e1, &a));
        prop_assert_ne!(delivery_id(e1, &a), delivery_id(e2, &a));
        prop_assert_eq!(delivery_id(e1, &a) == delivery_id(e1, &b), a == b);
    }
}

#[test]
fn rotation_keeps_the_old_secret_for_its_grace_period_only() {
    let t0 = DateTime::<Utc>::UNIX_EPOCH;
    let mut e = endpoint(0, vec![WebhookKind::AlertCleared], None, None, true);
    e.secrets = vec![Secret {
        value: "whsec_a".to_owned(),
        expires_at: None,
    }];
    let hour = chrono::Duration::hours(1);
    e.rotate("whsec_b".to_owned(), t0, t0 + hour);
    let values = |e: &Endpoint, at| {
        e.signing_secrets(at)
            .iter()
            .map(|s| s.value.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(values(&e, t0), ["whsec_b", "whsec_a"]);
    assert_eq!(values(&e, t0 + hour), ["whsec_b"]);
    e.rotate("whsec_c".to_owned(), t0 + hour * 2, t0 + hour * 3);
    assert_eq!(e.secrets.len(), 2, "the expired secret is dropped");
    assert!(
        !format!("{:?}", e.secrets).contains("whsec_c"),
        "never in Debug"
    );
}
