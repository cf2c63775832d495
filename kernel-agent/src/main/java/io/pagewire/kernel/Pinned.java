package io.pagewire.kernel;

/** A page just pinned: where it is, and the fault that brought it in (null if it was resident). */
public record Pinned(Translation translation, FaultKind fault) {
}
