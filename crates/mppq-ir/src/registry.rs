//! A registry of named extensions (platforms, parsers, exporters): built-ins first, then what
//! users register from their own crates. A name is taken once, so a built-in is never replaced
//! by accident; an unknown name is an error that lists the known ones. It lives at the bottom of
//! the stack because every crate that hosts extensions (`mppq-export`, `mppq-api`) uses it.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Why a registry refused a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown {kind} `{name}` (known: {known})")]
    Unknown { kind: &'static str, name: String, known: String },
    #[error("a {kind} named `{name}` is already registered")]
    Taken { kind: &'static str, name: String },
}

/// Named extensions of one kind (`T` = `dyn Platform`, `dyn Exporter`, …).
pub struct Registry<T: ?Sized + 'static> {
    /// What the entries are, for messages ("platform", "exporter").
    kind: &'static str,
    builtin: fn() -> Vec<(String, Arc<T>)>,
    map: OnceLock<RwLock<BTreeMap<String, Arc<T>>>>,
}

impl<T: ?Sized + 'static> Registry<T> {
    /// A registry whose built-ins `builtin` lists (called once, on first use).
    pub const fn new(kind: &'static str, builtin: fn() -> Vec<(String, Arc<T>)>) -> Self {
        Self { kind, builtin, map: OnceLock::new() }
    }

    fn map(&self) -> &RwLock<BTreeMap<String, Arc<T>>> {
        self.map.get_or_init(|| RwLock::new((self.builtin)().into_iter().collect()))
    }

    /// Adds `entry` under `name`; a name already taken is an error.
    pub fn register(&self, name: &str, entry: Arc<T>) -> Result<(), RegistryError> {
        let mut map = self.map().write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(name) {
            return Err(RegistryError::Taken { kind: self.kind, name: name.to_string() });
        }
        map.insert(name.to_string(), entry);
        Ok(())
    }

    /// The entry called `name`; the error lists the known ones.
    pub fn get(&self, name: &str) -> Result<Arc<T>, RegistryError> {
        let map = self.map().read().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned().ok_or_else(|| {
            let known = map.keys().cloned().collect::<Vec<_>>().join(", ");
            RegistryError::Unknown { kind: self.kind, name: name.to_string(), known }
        })
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.map().read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}
