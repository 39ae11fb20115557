/**
 * Operators' passwords, hashed with argon2id (the `argon2` package) at the parameters OWASP's password
 * storage guidance gives for it: 19 MiB of memory, 2 passes, 1 lane. The PHC string carries them, so a
 * hash made today still verifies after they are raised.
 */
import argon2 from 'argon2';
import type { PasswordHasher } from '../../../core/identity/operators.ts';

const options = { type: argon2.argon2id as 2, memoryCost: 19 * 1024, timeCost: 2, parallelism: 1 };

export class Argon2Passwords implements PasswordHasher {
  /** A hash of a password nobody has, made once, for verifyNothing. */
  private decoy: Promise<string> | null = null;

  hash(password: string): Promise<string> {
    return argon2.hash(password, options);
  }

  async verify(hash: string, password: string): Promise<boolean> {
    try {
      return await argon2.verify(hash, password);
    } catch {
      // A stored value that is not a PHC string verifies nothing.
      return false;
    }
  }

  async verifyNothing(password: string): Promise<void> {
    this.decoy ??= this.hash(`decoy:${Math.random()}`);
    await this.verify(await this.decoy, password);
  }
}
