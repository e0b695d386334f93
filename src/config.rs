//! Configuration layers: defaults (embedded `config/defaults.yml`) < `$DSH_HOME/dsh-chapters/config.yml`
//! < `<workspace>/.dsh-chapters/config.yml` < env `CHAPTERS_<KEY>` < flags. Unknown keys and bad
//! values are refused by name with file and line. OWNER: store helper.
