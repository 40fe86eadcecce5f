// Package rules is the coordinator's pure decision: which participants an
// event wakes and why every other candidate is not woken. Decide applies
// the trigger rules (to, mention, invited_auto, broadcast, prod), the
// scene's turns and a party round's selection to one event, given the
// thread's state before it, its parsed control, the config and the party
// facts; ParseMentions reads the mentions; PartyFromThread and PartyTurns
// read a party round and its rotation from the thread's events.
//
// Everything here is a function of its arguments: no I/O, no clock, no
// *Coordinator. Every coordinator that reads the same thread therefore
// decides the same (contract 7.1), and the rules are table-tested and
// fuzzed without a process or a network. The coordinator package is the
// shell that gathers the facts, records each Decision and carries it out.
package rules
