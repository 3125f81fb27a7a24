//! The live streams' places (decisions 140, 181): at most so many per token, per account and
//! in all, so that one token, or one account's tokens, cannot hold every connection. A stream
//! holds its [`StreamSlot`] for as long as it runs.

use crate::ports::TokenHash;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use swath_domain::AccountId;

/// The open live streams, per token and in all.
#[derive(Clone)]
pub struct StreamSlots {
    open: Arc<Mutex<Open>>,
    per_token: usize,
    per_account: usize,
    total: usize,
}

#[derive(Default)]
struct Open {
    by_token: HashMap<TokenHash, usize>,
    by_account: HashMap<AccountId, usize>,
    total: usize,
}

/// Why a stream was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamRefusal {
    /// The token holds this many streams already.
    PerToken(usize),
    /// The tokens of the token's account hold this many streams already, together.
    PerAccount(usize),
    /// The service holds this many streams already, every token together.
    Total(usize),
}

/// A live stream's place: given back when dropped (the stream ended or its client went away).
pub struct StreamSlot {
    open: Arc<Mutex<Open>>,
    token: TokenHash,
    account: AccountId,
}

impl StreamSlots {
    /// At most `per_token` streams per token, `per_account` per account and `total` in all.
    pub fn new(per_token: usize, per_account: usize, total: usize) -> Self {
        Self {
            open: Arc::default(),
            per_token,
            per_account,
            total,
        }
    }

    /// A place for one more stream of `token` of `account`, if the token has one left, its
    /// account too, and the service too.
    pub fn acquire(
        &self,
        token: &TokenHash,
        account: AccountId,
    ) -> Result<StreamSlot, StreamRefusal> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.total >= self.total {
            return Err(StreamRefusal::Total(open.total));
        }
        let held = open.by_token.get(token).copied().unwrap_or(0);
        if held >= self.per_token {
            return Err(StreamRefusal::PerToken(held));
        }
        let of_account = open.by_account.get(&account).copied().unwrap_or(0);
        if of_account >= self.per_account {
            return Err(StreamRefusal::PerAccount(of_account));
        }
        open.by_token.insert(token.clone(), held + 1);
        open.by_account.insert(account, of_account + 1);
        open.total += 1;
        Ok(StreamSlot {
            open: Arc::clone(&self.open),
            token: token.clone(),
            account,
        })
    }

    /// Streams open now, every token together.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(held) = open.by_token.get_mut(&self.token) {
            *held -= 1;
            if *held == 0 {
                open.by_token.remove(&self.token);
            }
        }
        if let Some(held) = open.by_account.get_mut(&self.account) {
            *held -= 1;
            if *held == 0 {
                open.by_account.remove(&self.account);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(s: &str) -> TokenHash {
        TokenHash(s.to_owned())
    }

    #[test]
    fn a_token_gets_its_share_and_the_service_its_total() {
        let account = AccountId::new();
        let slots = StreamSlots::new(2, 10, 3);
        let a1 = slots.acquire(&hash("a"), account).unwrap();
        let _a2 = slots.acquire(&hash("a"), account).unwrap();
        assert_eq!(
            slots.acquire(&hash("a"), account).err(),
            Some(StreamRefusal::PerToken(2))
        );
        let _b1 = slots.acquire(&hash("b"), account).unwrap();
        assert_eq!(
            slots.acquire(&hash("c"), AccountId::new()).err(),
            Some(StreamRefusal::Total(3))
        );
        drop(a1);
        assert_eq!(slots.open(), 2);
        let _a3 = slots.acquire(&hash("a"), account).unwrap();
    }

    #[test]
    fn an_account_gets_its_share_whatever_its_tokens() {
        let (a, b) = (AccountId::new(), AccountId::new());
        let slots = StreamSlots::new(2, 3, 10);
        let held: Vec<_> = ["a1", "a2"]
            .iter()
            .flat_map(|t| [slots.acquire(&hash(t), a), slots.acquire(&hash(t), a)])
            .collect();
        assert_eq!(held.iter().filter(|s| s.is_ok()).count(), 3);
        assert_eq!(
            held.iter()
                .filter_map(|s| s.as_ref().err())
                .collect::<Vec<_>>(),
            [&StreamRefusal::PerAccount(3)]
        );
        assert!(slots.acquire(&hash("b1"), b).is_ok(), "another account");
        drop(held);
        assert!(slots.acquire(&hash("a3"), a).is_ok(), "given back");
    }
}
