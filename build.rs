// sqlx::migrate! embeds the migration folders at compile time; without this, adding a migration
// file would not rebuild the crate (sqlx documents this build script).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
