// Package elastic plans the workers of an MPI job whose worker count may
// change while it runs, for any operator that runs MPI jobs as one launcher
// pod and numbered worker pods. It knows Pods, names and numbers only: the
// caller reads the job's spec into a [Spec], its worker pods into [Worker]s
// with [ParseWorkers], and acts on the [Plan] that [PlanWorkers] returns.
// Nothing here talks to the API server; every function is pure.
//
// # A worker's life
//
//  1. Created: the plan names its index in [Plan.Create], and its name is in
//     [Plan.Exec] (the workers the launcher may exec into) and
//     [Hosts.Desired] (the hostfile) in that same plan.
//  2. Running: once its pod runs, and [Spec.Listable] accepts it, it is
//     listed in [Hosts.Running], the contents of discover_hosts.sh, which
//     Horovod reads every second. It stays listed while it runs
//     ([Spec.Listed]), whatever Listable says later.
//  3. Draining: a worker chosen for removal is in [Plan.Drain] and leaves
//     Hosts.Running and Hosts.Desired in that same plan; the caller marks it
//     with [AnnotationDrainingSince], so later plans know it drains. It keeps
//     its exec rights until it is gone.
//  4. Deleted: once [Spec.DrainPeriod] has passed since the mark, the worker
//     is in [Plan.Remove]. [Plan.Requeue] says when to look again for the
//     next worker whose drain ends.
//
// A worker that fails leaves discover_hosts.sh and Exec at once. An elastic
// job replaces it under an index it has never used ([Plan.NextIndex],
// recorded in [State]): Horovod blacklists the name of a failed host, so no
// name is given out twice. [Replacements] tells which new worker replaces
// which failed one. A fixed job (not [Spec.Elastic]) keeps the workers
// 0..Replicas-1 as the upstream operator did: a failed worker stays, and
// the hostfile names every index in range whatever its state.
//
// # Invariants
//
// Every plan keeps these, whatever the workers' states:
//   - Exec before a worker exists: a worker about to be created is in
//     [Plan.Exec] already, and every listed worker is in Exec.
//   - A listed worker is never deleted: nothing in [Plan.Remove] or
//     [Plan.Drain] is in [Hosts.Running], and a live worker is drained
//     before it is removed.
//   - Names held by foreign pods are skipped: the caller's holder function
//     tells, for an index, whether a pod the job does not control holds the
//     worker's name ([NameHeld], [NameLeaving]); no such name is created or
//     granted exec. An elastic job takes its next free index instead; a
//     fixed job reports the name in [Plan.InTheWay] and waits.
//   - An elastic job keeps exactly [Spec.Replicas] live workers: the live
//     ones it does not drain plus the ones it creates. A worker that
//     Listable refuses is live like any other; it is only not listed.
//   - No name is created while the script lists it ([Spec.Listed]): a new
//     pod never inherits the listing of the one it replaces.
//
// # Acting on a plan
//
// The invariants hold in the cluster only if the caller writes in this
// order: write the hostfile and discover_hosts.sh from [Plan.Hosts] (which
// leave out [Plan.Drain]) together with [State] (NextIndex from the plan),
// and the launcher's exec rights from [Plan.Exec]; only then create
// [Plan.Create]; delete [Plan.Remove]; and mark draining the victims of
// [Plan.Drain] that the files as written no longer list, once the launcher
// has been told (package engine's Unlisted), so that the drain period
// counts from the write that took them out. A plan made from a cache that does not show
// the caller's own last pod writes yet may repeat them: drop its Create,
// Drain and Remove until the cache does, and write no files while a drain
// mark or deletion of the caller's is not shown, since the plan could list
// a worker already taken out. [Settled] tells when a resize is over, and
// [TrackMinReplicas] keeps the clock of a job that runs fewer than its
// minimum of workers. The bookkeeping lives in annotations ([State] on the
// object that holds the files, the others on pods), so that it survives a
// restart of the operator.
package elastic
