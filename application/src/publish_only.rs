//! A bus that only publishes: for a use case whose publications nobody subscribes to (an
//! import's ingest), and for the fakes of tests that record what a use case publishes.

use crate::ports::{
    BatchHandler, BatchSettings, BusError, EventBus, LiveOptions, LiveSubscription, Subscription,
};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

/// What a [`PublishOnly`] bus does with each publication.
pub trait Publisher: Send + Sync + 'static {
    /// The text of the `BusError::Refused` every subscription gets.
    const REFUSAL: &'static str;

    /// Takes one publication; its answer is the bus's.
    fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError>;
}

/// An event bus that hands every publication to its [`Publisher`] and refuses every subscription
/// with `BusError::Refused(P::REFUSAL)`; its ping always answers. It derefs to its publisher.
#[derive(Debug, Default)]
pub struct PublishOnly<P>(pub P);

impl<P> std::ops::Deref for PublishOnly<P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.0
    }
}

#[async_trait]
impl<P: Publisher> EventBus for PublishOnly<P> {
    async fn publish(
        &self,
        subject: &str,
        payload: Bytes,
        dedup_id: Option<String>,
    ) -> Result<(), BusError> {
        self.0.publish(subject, payload, dedup_id)
    }

    async fn subscribe_batch(
        &self,
        _subject: &str,
        _consumer: &str,
        _settings: BatchSettings,
        _handler: Arc<dyn BatchHandler>,
    ) -> Result<Subscription, BusError> {
        Err(BusError::Refused(P::REFUSAL.into()))
    }

    async fn subscribe(
        &self,
        _subject: &str,
        _options: LiveOptions,
    ) -> Result<LiveSubscription, BusError> {
        Err(BusError::Refused(P::REFUSAL.into()))
    }

    async fn ping(&self) -> Result<(), BusError> {
        Ok(())
    }
}
