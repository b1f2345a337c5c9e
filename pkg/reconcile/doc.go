// Package reconcile holds the machinery of a reconciling controller that is
// not tied to one version of the MPIJob API, so that the v1 and the v2beta1
// controllers share it instead of each keeping a copy. It knows client-go's
// object metadata, API errors and clocks; the caller brings its own listers,
// clients, API types and conditions.
//
//   - Safe child writes: [Ensure] gets or creates one child object of an
//     [Owner] from a [Child] description, and updates it only where what the
//     controller owns differs. An object of the child's name that the owner
//     does not control is never written: Ensure returns a [ForeignError]
//     (errors.Is [ErrResourceExists]) instead, also when the cache cannot see
//     that object and only the failed create reveals it.
//   - Bounded parallel creation: [InBatches] sends many requests in parallel
//     batches that start small and grow to [MaxBatch], and stops after a
//     batch in which one failed, so that a request bound to fail (a quota, a
//     webhook) is not sent once per object. [Concurrently] runs a few
//     independent writes at once.
//   - Exact expectations: [Expectations] remember, per job, the objects the
//     controller created, changed or deleted until the informer shows that
//     very change, so that a sync reading a cache a moment behind does not
//     repeat it; a predicate such as [ShowsAnnotation] or [ShowsDeletion]
//     tells which state of an object shows a change. [ExpectationsTimeout]
//     bounds the wait, should an event be lost.
//   - Health: [Health] tracks the progress of a controller's start and of
//     its workers' syncs, and [Health.Healthy] tells /healthz whether the
//     controller is stuck, so that a liveness probe restarts it.
//   - Classification of refused writes: [BlockedReason] tells whether an
//     error blocks a job until something changes (an object in the way, a
//     [SpecError], or a write the API server refuses for good: Invalid,
//     Forbidden, RequestEntityTooLarge, ...) and gives the reason for the
//     job's condition, which the caller sets in its own API's status;
//     anything else passes with a retry.
package reconcile
