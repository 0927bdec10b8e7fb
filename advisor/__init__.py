"""Performance models, revocation-risk model, recommendation engine."""
