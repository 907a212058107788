from fastenc.cli import main

raise SystemExit(main())
