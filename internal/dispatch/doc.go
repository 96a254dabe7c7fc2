// Package dispatch is the node-agent protocol's logic (agentapi is its
// wire format, the server its HTTP front): what a polling agent is told
// to do, the assignment it runs, what its reports of job states mean for
// jobs and nodes, and the tokens it joins and authenticates with.
//
// Decisions are pure functions of a View read from the store
// (Instructions, Assignment); writes are functions that run inside the
// caller's store transaction (ApplyJobState, ReleaseStale, Leave,
// Register). Service ties both to a store, a clock and the hub that holds
// agents' polls.
package dispatch
