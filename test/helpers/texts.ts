// Texts of the demo model's kind, shared by the fast-mode suite and bench/quality.ts (perplexity). No state.

/** ~480 tokens (past the demo model's index_topk) */
export const LONG_TEXT = [
  "A journey of a thousand miles begins with a single step. The best way to predict the future is to invent it.",
  "You will be successful in your work, but not in your love life. Never put off till tomorrow what you can do the day after tomorrow.",
  "Don't worry about the world coming to an end today. It is already tomorrow in Australia. The early bird catches the worm, but the",
  "second mouse gets the cheese. All that glitters is not gold. Actions speak louder than words. Beauty is in the eye of the beholder.",
  "Every cloud has a silver lining. Fortune favors the bold. Honesty is the best policy. If it ain't broke, don't fix it. Knowledge is power.",
  "Laughter is the best medicine. Necessity is the mother of invention. Practice makes perfect. Rome wasn't built in a day. The pen is",
  "mightier than the sword. Time is money. When in Rome, do as the Romans do. Where there's a will, there's a way. You can't judge a book",
  "by its cover. A picture is worth a thousand words. Better late than never. Birds of a feather flock together. Don't count your chickens",
  "before they hatch. Easy come, easy go. Good things come to those who wait. Haste makes waste. It takes two to tango. Look before you leap.",
].join("\n");
