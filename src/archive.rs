//! The archive door (shell): discover sessions, sign, compose, render, write.
