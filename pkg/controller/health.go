package controller

// Healthy returns nil unless the controller is stuck, and otherwise a
// one-line reason; /healthz serves it so that a liveness probe restarts a
// stuck operator. The controller's reconcile.Health tracks the progress of
// Run and of the main queue's syncs.
func (c *MPIJobController) Healthy() error {
	return c.health.Healthy(c.clock.Now())
}
