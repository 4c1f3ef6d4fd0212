//! Form-mode elicitation (stub: filled in by the forms work).
