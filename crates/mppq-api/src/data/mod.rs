//! Data a user gives: NumPy files ([`npy`]) and calibration sets ([`calib`]: NumPy batches, raw
//! `.bin` files, image folders with their preprocessing; bounded in memory).

pub mod calib;
pub mod npy;
