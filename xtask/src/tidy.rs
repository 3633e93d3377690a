//! tidy
