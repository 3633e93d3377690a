//! A registry of named extensions (platforms, exporters): built-ins first, then what users
//! register from their own crates. A name is taken once, so a built-in is never replaced by
//! accident; an unknown name is an error that lists the known ones.

use crate::error::{ApiError, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Named extensions of one kind (`T` = `dyn Platform`, `dyn Exporter`).
pub(crate) struct Registry<T: ?Sized + 'static> {
    /// What the entries are, for messages ("platform", "exporter").
    kind: &'static str,
    builtin: fn() -> Vec<(String, Arc<T>)>,
    map: OnceLock<RwLock<BTreeMap<String, Arc<T>>>>,
}

impl<T: ?Sized + 'static> Registry<T> {
    pub(crate) const fn new(kind: &'static str, builtin: fn() -> Vec<(String, Arc<T>)>) -> Self {
        Self { kind, builtin, map: OnceLock::new() }
    }

    fn map(&self) -> &RwLock<BTreeMap<String, Arc<T>>> {
        self.map.get_or_init(|| RwLock::new((self.builtin)().into_iter().collect()))
    }

    pub(crate) fn register(&self, name: &str, entry: Arc<T>) -> Result<()> {
        let mut map = self.map().write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(name) {
            return Err(ApiError::Setting(format!("a {} named `{name}` is already registered", self.kind)));
        }
        map.insert(name.to_string(), entry);
        Ok(())
    }

    pub(crate) fn get(&self, name: &str) -> Result<Arc<T>> {
        let map = self.map().read().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned().ok_or_else(|| {
            let known = map.keys().cloned().collect::<Vec<_>>().join(", ");
            ApiError::Setting(format!("unknown {} `{name}` (known: {known})", self.kind))
        })
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.map().read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}
