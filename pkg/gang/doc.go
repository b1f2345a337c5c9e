// Package gang holds what both MPIJob controllers decide alike about the
// PodGroups of gang scheduling.
package gang
