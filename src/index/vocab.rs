//! The emergent vocabulary (record §6.3), PURE: merge candidates and `topics/vocabulary.json`.
