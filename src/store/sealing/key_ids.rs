//! The key that sealed a value, read by the database from the value itself: a sealed blob
//! starts `v1 ‖ key_id(8)` ([`crate::crypto`]), so the key is never taken from a column that
//! could disagree with it. Each room that keeps sealed values asks with this expression.

use crate::store::machinery::store::Backend;

/// The key id of the sealed `column`, as SQL: bytes 2..9 of the blob, lowercase hex. The two
/// databases spell substring and hex differently.
pub(in crate::store) fn key_id_sql(backend: Backend, column: &str) -> String {
    match backend {
        Backend::Sqlite => format!("lower(hex(substr({column}, 2, 8)))"),
        Backend::Postgres => format!("encode(substring({column} from 2 for 8), 'hex')"),
    }
}
