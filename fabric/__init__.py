"""InfiniBand fabric tooling: prove the network is cabled as designed.

- `design`, `design_csv`, `generate`: the cabling design (YAML), partner CSV import, fat-tree generator.
- `parsers`: ibnetdiscover (and `-p`), iblinkinfo (and `-l`), UFM REST JSON -> `topology.Topology`.
- `identify`: discovered GUIDs -> design names (description, GUID, cabling), OpenSM node-name-map.
- `validate`, `findings`, `worklist`: one finding per fault with both ends' locations and a fix.
  `validate` runs the device checks itself, the wiring checks of `wiring_checks` over the shared
  `check_context`, and `validation_summary` for the report's counts.
- `baseline`: a known-good capture used as the design; `live`: run discovery from every attachment point.
- `toolrun`: the one way an infiniband-diags tool runs (deadline, group kill, output cap, scratch directory);
  `diags`: how the site's tools reach the fabric; `counter_sweep`: every switch port's counters, live.
- `pipeline`: inputs -> topology -> identification -> report, one call per command.
- `cli`: the `fabric` command (options only); `options`: the options its commands share; `render`: what
  each command prints and writes.
"""
