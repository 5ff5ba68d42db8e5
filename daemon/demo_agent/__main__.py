"""`python -m sessiond.daemon.demo_agent`: run the demo agent over stdio."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
