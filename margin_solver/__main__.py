from margin_solver.cli import main

raise SystemExit(main())
