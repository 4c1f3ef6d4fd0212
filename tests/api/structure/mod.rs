//! The code's shape, checked: the module graph of `src/` points one way, and no test file imports
//! another.

mod layers;
mod test_imports;
