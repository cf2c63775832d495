package io.pagewire.kernel;

/** A served page fault: how it was served, where the page now is, and how long the service took. */
public record PageFault(FaultKind kind, Translation translation, long serviceTimeNs) {
}
