"""Entry point of ``python -m hardware`` (see ``hardware/report.py``)."""

from hardware.report import main

raise SystemExit(main())
