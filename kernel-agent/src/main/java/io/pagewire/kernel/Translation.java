package io.pagewire.kernel;

/**
 * Where a virtual page was resident when the kernel was asked: its frame, the frame's generation
 * (checked by {@link PhysicalMemory#tryLockForDma}) and the address space's invalidation sequence
 * (checked by {@link AddressSpace#isCurrent} before a NIC caches the translation).
 */
public record Translation(int frame, int generation, long sequence) {
}
