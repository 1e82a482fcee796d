package com.example.bank;

import java.util.ArrayList;
import java.util.List;

/** A bank account, written to exercise the grammar queries. */
public class Account {
    private final String owner;
    private final List<Long> history = new ArrayList<>();
    private long balance;

    public Account(String owner) {
        this.owner = owner;
    }

    public void deposit(long amount) {
        if (amount <= 0) {
            throw new IllegalArgumentException("amount must be positive");
        }
        balance += amount;
        history.add(amount);
    }

    public long largestDeposit() {
        long best = 0;
        for (long amount : history) {
            best = Math.max(best, amount);
        }
        return best;
    }

    public void close() {}

    public Runnable auditor() {
        return () -> {
            System.out.println(owner + ": " + balance);
        };
    }

    interface Listener {
        void changed(long balance);
    }
}
