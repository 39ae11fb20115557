/**
 * The signed-in operator, for every view: the header shows who it is, and the views leave out the
 * controls their roles do not allow (the server refuses those calls anyway; hiding them is for people).
 */
import { createContext, useContext } from 'react';
import type { Me } from './api.ts';

const MeContext = createContext<Me | null>(null);
export const MeProvider = MeContext.Provider;

export function useMe(): Me {
  const me = useContext(MeContext);
  if (!me) throw new Error('useMe outside a signed-in view');
  return me;
}

/** What the signed-in operator may do (see `Me.can`). */
export const useCan = (): Me['can'] => useMe().can;
