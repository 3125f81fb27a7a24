//! The cross-tenant suite against the memory store, and the check that it has one scenario per
//! use case method that takes a principal and an id.

use std::collections::BTreeSet;
use std::path::Path;
use swath_tests::cross_tenant::{MemoryCrossTenant, METHODS};

swath_tests::contract_suite!(
    cross_tenant,
    #[tokio::test]
    factory = MemoryCrossTenant,
);

/// The id types a use case method can be asked about.
const ID_TYPES: &[&str] = &["MowerId", "SiteId", "TokenId", "AccountId", "WebhookId"];

/// `Type::method` of every `pub async fn` of the application whose parameters hold a
/// `&Principal` and one of [`ID_TYPES`] (alone, in an `Option` or a slice), named by the `impl`
/// it is in. `visibility.rs` is left out: it is the visibility rule those methods ask, not a use case.
fn methods_with_a_principal_and_an_id(dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("the application's sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            methods_with_a_principal_and_an_id(&path, found);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("visibility.rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a source file");
        let mut owner = String::new();
        let mut rest = source.as_str();
        while let Some(at) = rest.find(['i', 'p']) {
            let here = &rest[at..];
            if let Some(tail) = here.strip_prefix("impl ") {
                if rest[..at].ends_with('\n') {
                    let head: String = tail.chars().take_while(|c| *c != '{').collect();
                    // `impl Trait for Type` names the type; `impl Type` is the type.
                    let ty = head.rsplit(" for ").next().unwrap_or(&head).trim();
                    owner = ty.split('<').next().unwrap_or(ty).to_owned();
                }
            } else if let Some(tail) = here.strip_prefix("pub async fn ") {
                let name: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let params = tail.split_once('(').map(|(_, p)| p).unwrap_or("");
                let params = params.split_once(") ->").map(|(p, _)| p).unwrap_or(params);
                let takes_id = ID_TYPES.iter().any(|t| params.contains(t));
                if params.contains("&Principal") && takes_id {
                    found.insert(format!("{owner}::{name}"));
                }
            }
            rest = &rest[at + 1..];
        }
    }
}

#[test]
fn the_scenarios_name_every_method() {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("../application/src");
    let mut methods = BTreeSet::new();
    methods_with_a_principal_and_an_id(&sources, &mut methods);
    let scenarios: BTreeSet<String> = METHODS.iter().map(|m| (*m).to_owned()).collect();
    assert_eq!(
        scenarios.len(),
        METHODS.len(),
        "each method has one scenario"
    );
    let missing: Vec<_> = methods.difference(&scenarios).collect();
    let extra: Vec<_> = scenarios.difference(&methods).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "methods without a scenario: {missing:?}; scenarios without a method: {extra:?}"
    );
    assert_eq!(METHODS.len(), methods.len());
}
