/**
 * What features provide to the features after them, by name. Empty here: each feature adds its entries
 * with a declaration of its own (`declare module '../../host/provisions.ts'`), so the host imports no
 * feature and a feature sees another's provision through its exported types only.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled by the features' declarations.
export interface Provisions {}
