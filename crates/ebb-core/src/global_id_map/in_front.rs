//! [`MapInFront`]: a map standing in front of another, for tests that
//! change what a few operations do (fail, wait, count, race) and let the
//! rest through, without writing out every operation of [`GlobalIdMap`].

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;
use core::time::Duration;

use super::{GlobalIdMap, Lease, MapFuture, Swap, Watch};
use crate::NodeId;

/// A map in front of [`MapInFront::inner`]: every operation goes to it
/// unless the implementation overrides it; [`GlobalIdMap`] comes with
/// it. Implement it by path (`impl ebb_core::MapInFront for T`) without
/// importing it, so that calls on `T` name [`GlobalIdMap`]'s methods only.
pub trait MapInFront: Send + Sync {
    /// The map behind.
    fn inner(&self) -> &dyn GlobalIdMap;

    /// [`GlobalIdMap::get`].
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        self.inner().get(key)
    }

    /// [`GlobalIdMap::set`].
    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        self.inner().set(key, value, lease)
    }

    /// [`GlobalIdMap::delete`].
    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        self.inner().delete(key)
    }

    /// [`GlobalIdMap::compare_and_swap`].
    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        self.inner().compare_and_swap(key, expected, new)
    }

    /// [`GlobalIdMap::list`].
    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        self.inner().list(prefix)
    }

    /// [`GlobalIdMap::reserve_range`].
    fn reserve_range(&self, node: NodeId, len: u32) -> MapFuture<'_, Range<u32>> {
        self.inner().reserve_range(node, len)
    }

    /// [`GlobalIdMap::grant_lease`].
    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
        self.inner().grant_lease(ttl)
    }

    /// [`GlobalIdMap::keep_alive`].
    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        self.inner().keep_alive(lease)
    }

    /// [`GlobalIdMap::revoke`].
    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        self.inner().revoke(lease)
    }

    /// [`GlobalIdMap::watch`].
    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        self.inner().watch(prefix)
    }
}

impl<T: MapInFront> GlobalIdMap for T {
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        MapInFront::get(self, key)
    }

    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        MapInFront::set(self, key, value, lease)
    }

    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        MapInFront::delete(self, key)
    }

    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        MapInFront::compare_and_swap(self, key, expected, new)
    }

    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        MapInFront::list(self, prefix)
    }

    fn reserve_range(&self, node: NodeId, len: u32) -> MapFuture<'_, Range<u32>> {
        MapInFront::reserve_range(self, node, len)
    }

    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
        MapInFront::grant_lease(self, ttl)
    }

    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        MapInFront::keep_alive(self, lease)
    }

    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        MapInFront::revoke(self, lease)
    }

    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        MapInFront::watch(self, prefix)
    }
}
