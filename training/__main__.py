from training.cli import main

raise SystemExit(main())
