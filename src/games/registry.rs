//! The types made of the one list of games (`with_games!` in `games/mod.rs`): every arm
//! over the games is written here once, for every game, from its [`Declared`]
//! declaration, so that a game added to the list is in every one of them, and a game
//! missing a fact does not compile.
//!
//! [`Declared`]: super::Declared

/// Declares [`super::GameKind`], [`super::Game`], [`super::GameRef`] and [`super::Move`]
/// and their arms for the games listed, each as `module::Declaration`.
macro_rules! declare_games {
    ($($module:ident :: $game:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// The games this crate solves: what the rest of the crate asks of a game by name,
        /// one variant a game of the list in `games/mod.rs`, in the order of the wire
        /// contract's `oneof`s.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum GameKind {
            $(
                #[doc = concat!("[`", stringify!($module), "`].")]
                $game,
            )+
        }

        impl GameKind {
            /// Every game, in the order of the wire contract's `oneof`.
            pub const ALL: [GameKind; [$(stringify!($game)),+].len()] = [$(GameKind::$game),+];

            /// Every name and number the game's folder declares.
            pub(crate) const fn facts(self) -> $crate::games::declare::GameFacts {
                match self {
                    $(GameKind::$game => <$crate::games::$module::$game as $crate::games::Declared>::FACTS,)+
                }
            }

            /// What the input is (a string, an integer, a list of integers): how a door
            /// without the proto's types (Arrow columns, CSV cells) carries it.
            pub const fn input_shape(self) -> $crate::games::InputShape {
                match self {
                    $(GameKind::$game => <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                        as $crate::games::declare::Shape>::SHAPE,)+
                }
            }

            /// The kernel a column of this game's problems is answered with.
            pub const fn kernel(self) -> $crate::games::ColumnKernel {
                match self {
                    $(GameKind::$game => <$crate::games::$module::$game as $crate::games::Declared>::KERNEL,)+
                }
            }

            /// A random problem of this game, its sizes drawn within `sizes`: one range for
            /// each of [`GameKind::sizes`], in that order (the caller's contract: fewer
            /// panics).
            pub fn random(
                self,
                rng: &mut impl rand::RngExt,
                sizes: &[std::ops::RangeInclusive<u64>],
            ) -> Game {
                match self {
                    $(GameKind::$game => Game::$game(
                        <$crate::games::$module::$game as $crate::games::Declared>::random(rng, sizes),
                    ),)+
                }
            }

            /// The game of this kind with `input`, or `None` when `input` is not of this
            /// game's shape ([`GameKind::input_shape`]).
            pub fn with_input(self, input: $crate::games::Input) -> Option<Game> {
                match self {
                    $(GameKind::$game => <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                        as $crate::games::declare::Shape>::from_input(input).map(Game::$game),)+
                }
            }

            /// How to make this game from a borrowed input of its shape.
            pub fn make_ref(self) -> $crate::games::MakeGameRef {
                match self {
                    $(GameKind::$game => <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                        as $crate::games::declare::Shape>::make_ref::<$crate::games::$module::$game>(),)+
                }
            }
        }

        $(
            impl $crate::games::declare::Variant for $crate::games::$module::$game {
                fn game_ref(input: $crate::games::declare::InputOf<'_, Self>) -> GameRef<'_> {
                    GameRef::$game(input)
                }
            }
        )+

        /// One problem of any game, owning its input.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Game {
            $(
                #[doc = concat!("A problem of [`", stringify!($module), "`].")]
                $game($crate::games::declare::OwnedOf<$crate::games::$module::$game>),
            )+
        }

        /// One problem of any game, borrowing its input: what a door that keeps its
        /// inputs in buffers of its own (Arrow columns) solves without copying a row.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum GameRef<'a> {
            $(
                #[doc = concat!("A problem of [`", stringify!($module), "`].")]
                $game($crate::games::declare::InputOf<'a, $crate::games::$module::$game>),
            )+
        }

        /// Alice's winning first move, per game.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Move {
            $(
                #[doc = concat!("A move of [`", stringify!($module), "`].")]
                $game(<$crate::games::$module::$game as $crate::games::Declared>::Move),
            )+
        }

        impl Move {
            /// The move's game and its values, in the order of that game's
            /// [`GameKind::move_fields`]: how every door that is not the proto's own types
            /// (the codec's writer, Arrow columns) carries a move.
            pub fn values(&self) -> (GameKind, $crate::games::MoveValues) {
                match *self {
                    $(Move::$game(m) => (
                        GameKind::$game,
                        <$crate::games::$module::$game as $crate::games::Declared>::move_values(m),
                    ),)+
                }
            }
        }

        impl Game {
            /// The game with its input borrowed.
            #[inline]
            pub fn borrowed(&self) -> GameRef<'_> {
                match self {
                    $(Game::$game(input) => GameRef::$game(
                        <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                            as $crate::games::declare::Shape>::borrow(input),
                    ),)+
                }
            }
        }

        impl<'a> GameRef<'a> {
            /// The game with its input copied.
            pub fn to_owned(self) -> Game {
                match self {
                    $(GameRef::$game(input) => Game::$game(
                        <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                            as $crate::games::declare::Shape>::to_owned(input),
                    ),)+
                }
            }

            /// The same game, its input borrowed for less long (`GameRef` holds each game's
            /// input through its shape's trait, which the compiler does not shorten).
            #[inline]
            pub fn shorten<'b>(self) -> GameRef<'b>
            where
                'a: 'b,
            {
                match self {
                    $(GameRef::$game(input) => GameRef::$game(
                        <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                            as $crate::games::declare::Shape>::shorten(input),
                    ),)+
                }
            }

            /// Which game this is and its input.
            pub fn parts(self) -> (GameKind, $crate::games::InputRef<'a>) {
                match self {
                    $(GameRef::$game(input) => (
                        GameKind::$game,
                        <$crate::games::declare::ShapeOf<$crate::games::$module::$game>
                            as $crate::games::declare::Shape>::input(input),
                    ),)+
                }
            }

            /// Solves the game; the table-driven games answer from (and may grow) `tables`.
            pub fn solve(self, tables: &Tables) -> Result<Outcome, SolveError> {
                match self {
                    $(GameRef::$game(input) =>
                        <$crate::games::$module::$game as $crate::games::Declared>::solve(input, tables),)+
                }
            }

            /// The outcome without a move: a game with a cheaper way than solving and
            /// dropping the move (a table's binary search, no move search) takes it.
            pub fn winner(self, tables: &Tables) -> Result<Outcome, SolveError> {
                match self {
                    $(GameRef::$game(input) =>
                        <$crate::games::$module::$game as $crate::games::Declared>::winner(input, tables),)+
                }
            }

            /// The largest pile of the game that its table must cover first, if it does
            /// not yet.
            pub fn needs_extension(self, tables: &Tables) -> Option<(GameKind, u64)> {
                match self {
                    $(GameRef::$game(input) =>
                        <$crate::games::$module::$game as $crate::games::Declared>::needs_extension(input, tables)
                            .map(|n| (GameKind::$game, n)),)+
                }
            }
        }
    };
}

pub(crate) use declare_games;
