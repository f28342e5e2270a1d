"""SGAM's HTTP service for chat backends (`sgam serve`): `create_app()` in `pipeline.api.app`."""
