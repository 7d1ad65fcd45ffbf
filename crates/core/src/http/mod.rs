//! HTTP/1.1 client (to be written).
