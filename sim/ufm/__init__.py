"""The simulated UFM Enterprise REST API, driven by the lab's ibsim fabric."""
